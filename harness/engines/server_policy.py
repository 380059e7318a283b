"""What lbench lets reach a server it starts: an allow-list of flags and environment variables
known to be safe for a measurement (issue 47).

Server arguments and environment come from files people exchange (spec files, claim files, a
colleague's command line), so each one is checked before any run directory exists:

- the loopback rule first (engines/reserved.py: the address, port and model are lbench's own);
- then a named refusal for what hands the server to someone else: what **loads code**
  (``LD_PRELOAD``, ``LD_LIBRARY_PATH``, ``DYLD_*``, ``--mcp-servers-json``, a ggml backend or
  Vulkan layer path), what **runs commands** on request (``--tools``, ``--agent``,
  ``--tools-runtime``), what **connects off the machine** (``--rpc``, ``LLAMA_ARG_RPC``, the web
  UI's MCP proxy, CORS for other origins, RDMA);
- then the allow-list: a flag or variable not on it is refused too (exit 2, the reason), since a
  new build can add a flag lbench has not looked at.

The llama-server flags are those of the pinned build 11434 (``llama-server --help``, from
common/arg.cpp of its sources), kept to the ones that change how a server computes, caches,
places threads and memory, samples, or logs to its own stderr; a run's flags are also checked
against its own binary's ``--help`` (engines/server_flags.py).  The environment variables are
ggml's and llama.cpp's tuning and debugging variables (``GGML_*``, ``LLAMA_ARG_*`` of an allowed
flag), OpenMP's, and the backends' device selection variables.

Whoever needs something refused passes it knowingly with ``--unsafe-server-arg ARG`` or
``--unsafe-server-env NAME=VALUE`` (the command line only, never a spec file); each is recorded in
the manifest (``config.unsafe_server_args``, ``config.unsafe_server_env``), printed as a warning
when the run starts, and still obeys the loopback rule.

Where a server is actually started (``LlamaServerEngine.start``, ``RouterProcess``) ``check_start``
applies the allow-list once more to the arguments and variables that came from outside, apart from
the recorded overrides: a caller that skipped the entry points' checks still cannot pass a refused
flag or variable (defence in depth; the entry points refuse first, with their own message).
"""

from __future__ import annotations

import difflib

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from harness import shell
from harness.engines import reserved
from harness.engines.devices import is_selection_var
from harness.errors import BadInput

LOADS_CODE = "loads code into the server"
RUNS_COMMANDS = "opens an endpoint that runs commands"
OFF_MACHINE = "connects the server to another machine"
READS_FILES = "makes the server read or serve files lbench did not choose"

# llama-server flags refused by name, with what each does (llama.cpp common/arg.cpp, build 11434)
REFUSED_FLAGS: dict[str, str] = {
    **dict.fromkeys(("--mcp-servers-json", "--mcp-servers-config"), LOADS_CODE + " (starts the MCP servers' commands)"),
    "--video-ffmpeg-dir": LOADS_CODE + " (runs the ffmpeg found in that folder)",
    **dict.fromkeys(("--tools", "-ag", "--agent"), RUNS_COMMANDS + " (built-in tools: exec_shell_command, write_file)"),
    "--tools-runtime": RUNS_COMMANDS + " (docker, podman, or ssh: to another host)",
    "--rpc": OFF_MACHINE + " (RPC servers compute on the model)",
    **dict.fromkeys(("--ui-mcp-proxy", "--webui-mcp-proxy"), OFF_MACHINE + " (the web UI's MCP proxy)"),
    **dict.fromkeys(("--cors-origins", "--cors-methods", "--cors-headers", "--cors-credentials"),
                    OFF_MACHINE + " (lets web pages from other origins call it)"),
    **dict.fromkeys(("--path", "--media-path", "--slot-save-path", "--log-prompts-dir", "--log-file",
                     "--ssl-key-file", "--ssl-cert-file", "--api-key-file", "--chat-template-file",
                     "--ui-config-file", "--webui-config-file", "-f", "--file", "-bf", "--binary-file",
                     "--grammar-file", "-jf", "--json-schema-file", "-sysf", "--system-prompt-file",
                     "--lora", "--lora-scaled", "--control-vector", "--control-vector-scaled",
                     "-md", "--model-draft", "--spec-draft-model", "-mm", "--mmproj"), READS_FILES),
}

# llama-server flags that change a measurement and nothing else (build 11434's --help)
LLAMA_SERVER_FLAGS = frozenset("""
-t --threads -tb --threads-batch -C --cpu-mask -Cr --cpu-range --cpu-strict --prio --poll -Cb --cpu-mask-batch
-Crb --cpu-range-batch --cpu-strict-batch --prio-batch --poll-batch
-c --ctx-size --kv-unified-per-slot -n --predict --n-predict -b --batch-size -ub --ubatch-size --keep --swa-full
-ctxcp --ctx-checkpoints --swa-checkpoints -cms --checkpoint-min-step -cram --cache-ram -kvu --kv-unified -no-kvu
--no-kv-unified --cache-idle-slots --no-cache-idle-slots --context-shift --no-context-shift -fa --flash-attn
--perf --no-perf --warmup --no-warmup -s --seed --samplers --sampler-seq --sampling-seq --ignore-eos --temp
--temperature --top-k --top-p --min-p --top-nsigma --top-n-sigma --xtc-probability --xtc-threshold --typical
--typical-p --repeat-last-n --repeat-penalty --presence-penalty --frequency-penalty --dry-multiplier --dry-base
--dry-allowed-length --dry-penalty-last-n --dry-sequence-breaker --adaptive-target --adaptive-decay
--dynatemp-range --dynatemp-exp --mirostat --mirostat-lr --mirostat-ent -bs --backend-sampling --pooling
--rope-scaling --rope-scale --rope-freq-base --rope-freq-scale --yarn-orig-ctx --yarn-ext-factor --yarn-attn-factor
--yarn-beta-slow --yarn-beta-fast -kvo --kv-offload -nkvo --no-kv-offload --repack -nr --no-repack --no-host
-ctk --cache-type-k -ctv --cache-type-v -dt --defrag-thold -np --parallel -cb --cont-batching -nocb
--no-cont-batching --no-mmproj --no-mmproj-auto -lm --load-mode -lzm --lazy-mode --numa -dev --device
-ot --override-tensor -cmoe --cpu-moe -ncmoe --n-cpu-moe -ncffn --n-cpu-ffn -ngl --gpu-layers --n-gpu-layers
-sm --split-mode -ts --tensor-split -mg --main-gpu -fit --fit -fitt --fit-target -fitc --fit-ctx --check-tensors
--op-offload --no-op-offload --no-ui --no-webui --no-ui-mcp-proxy --no-webui-mcp-proxy -no-ag --no-agent
-to --timeout --threads-http --cache-prompt --no-cache-prompt --cache-reuse --metrics --props --slots --no-slots
-sps --slot-prompt-similarity --sleep-idle-seconds --jinja --no-jinja --reasoning-format -rea --reasoning
--reasoning-budget --log-disable --log-colors -v --verbose --log-verbose -lv --verbosity --log-verbosity
--log-prefix --no-log-prefix --log-timestamps --no-log-timestamps
-td --threads-draft --spec-draft-threads -tbd --threads-batch-draft --spec-draft-threads-batch -ctkd
--cache-type-k-draft -ctvd --cache-type-v-draft --spec-draft-n-max --spec-draft-n-min --draft --draft-n
--draft-max --draft-min --draft-n-min --spec-type --spec-ngram-size-n --spec-ngram-size-m --spec-ngram-min-hits
""".split())
# mlx_lm.server flags that change a measurement only (lbench's mlx engine; not runnable on this Linux VM)
MLX_SERVER_FLAGS = frozenset({"--max-tokens", "--temp", "--top-p", "--top-k", "--min-p", "--log-level",
                              "--prompt-cache-size", "--prompt-cache-bytes", "--decode-concurrency",
                              "--prompt-concurrency", "--num-draft-tokens"})
MEASUREMENT_FLAGS = LLAMA_SERVER_FLAGS | MLX_SERVER_FLAGS

# environment variables refused by name or prefix, with what each does
REFUSED_ENV: dict[str, str] = {
    **dict.fromkeys(("LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "LD_", "DYLD_", "GGML_BACKEND_PATH",
                     "GGML_BACKEND_DIR", "GGML_ET_KERNELS_PATH", "GGML_OPENCL_KERNEL_CACHE_DIR", "OMP_TOOL", "OMP_TOOL_",
                     "VK_ICD_FILENAMES", "VK_DRIVER_FILES", "VK_ADD_DRIVER_FILES", "VK_LAYER_PATH",
                     "VK_ADD_LAYER_PATH", "VK_INSTANCE_LAYERS", "VK_LOADER_LAYERS_ENABLE", "CUDA_INJECTION64_PATH",
                     "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "GGML_BACKTRACE_LLDB"), LOADS_CODE),
    **dict.fromkeys(("LLAMA_ARG_TOOLS", "LLAMA_ARG_AGENT", "LLAMA_ARG_MCP_SERVERS_CONFIG",
                     "LLAMA_ARG_MCP_SERVERS_JSON", "LLAMA_ARG_VIDEO_FFMPEG_DIR"), RUNS_COMMANDS),
    **dict.fromkeys(("LLAMA_ARG_RPC", "GGML_RPC_", "GGML_RDMA_", "GGML_REMOTING_", "LLAMA_ARG_UI_MCP_PROXY",
                     "LLAMA_ARG_CORS_", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"), OFF_MACHINE),
}
# LLAMA_ARG_* variables of allowed flags (build 11434's common/arg.cpp set_env), by flag
LLAMA_ARG_ENV = frozenset("""
THREADS CTX_SIZE KV_UNIFIED_PER_SLOT N_PREDICT BATCH UBATCH SWA_FULL CTX_CHECKPOINTS CHECKPOINT_MIN_SPACING_NT
CACHE_RAM KV_UNIFIED CACHE_IDLE_SLOTS CONTEXT_SHIFT FLASH_ATTN PERF TEMPERATURE TOP_K TOP_P MIN_P REPEAT_PENALTY
PRESENCE_PENALTY FREQUENCY_PENALTY BACKEND_SAMPLING POOLING ROPE_SCALING_TYPE ROPE_SCALE ROPE_FREQ_BASE
ROPE_FREQ_SCALE YARN_ORIG_CTX YARN_EXT_FACTOR YARN_ATTN_FACTOR YARN_BETA_SLOW YARN_BETA_FAST KV_OFFLOAD REPACK
NO_HOST CACHE_TYPE_K CACHE_TYPE_V DEFRAG_THOLD N_PARALLEL CONT_BATCHING MMPROJ_AUTO LOAD_MODE LAZY_MODE NUMA DEVICE
OVERRIDE_TENSOR CPU_MOE N_CPU_MOE N_CPU_FFN N_GPU_LAYERS SPLIT_MODE TENSOR_SPLIT MAIN_GPU FIT FIT_TARGET FIT_CTX
TIMEOUT THREADS_HTTP CACHE_PROMPT CACHE_REUSE ENDPOINT_METRICS ENDPOINT_PROPS ENDPOINT_SLOTS JINJA THINK REASONING
THINK_BUDGET LOG_COLORS LOG_VERBOSITY LOG_PREFIX LOG_TIMESTAMPS UI MODELS_MAX MODELS_AUTOLOAD
SPEC_DRAFT_CACHE_TYPE_K SPEC_DRAFT_CACHE_TYPE_V SPEC_DRAFT_N_MAX SPEC_DRAFT_N_MIN SPEC_TYPE DRAFT_MAX DRAFT_MIN
""".split())
# tuning and debugging variables read by ggml, llama.cpp and OpenMP runtimes (none loads, runs or connects), and
# lbench's own markers (LBENCH_PROBE: a claim's check that a child inherits its environment)
ALLOWED_ENV_PREFIXES = ("LBENCH_", "GGML_", "OMP_", "GOMP_", "KMP_", "LLAMA_GRAPH_", "LLAMA_KV_CACHE_DEBUG",
                        "LLAMA_ATTN_ROT_DISABLE", "LLAMA_SERVER_SLOTS_DEBUG")
# LLAMA_SERVER_DEBUG_FAKE_TIMING: upstream's router test switch (11434 tools/server/server-models.cpp:619): it
# only sleeps (2 s before a load, 2 s after counting a proxied request), so a claim can make a race deterministic
ALLOWED_ENV = frozenset({"LLAMA_CACHE", "CUDA_DEVICE_ORDER", "CUDA_LAUNCH_BLOCKING", "CUDA_MODULE_LOADING",
                         "NO_COLOR", "MLX_METAL_DEBUG", "LLAMA_SERVER_DEBUG_FAKE_TIMING"})


@dataclass(frozen=True)
class Verdict:
    """Whether a flag or variable may reach a server, and why (the reason a refusal prints)."""

    allowed: bool
    reason: str


def flag_name(arg: str) -> str | None:
    """The flag an argument names (``--x=1`` -> ``--x``, ``--models_max`` -> ``--models-max``),
    None for a value (``8``, ``-1``, ``x.gguf``)."""
    if not arg.startswith("-") or arg == "-" or arg[1:2].isdigit() or arg[1:3].startswith("."):
        return None
    name = arg.split("=", 1)[0]
    return name.replace("_", "-") if name.startswith("--") else name


def flag_verdict(arg: str) -> Verdict:
    """Whether the flag ``arg`` names (``--rpc``, ``--threads=4``, ``-t``) may reach a server."""
    hit = reserved.reserved_flag(arg)
    if hit is not None:
        return Verdict(False, f"reserved: lbench sets {reserved.WHY[hit]} itself")
    name = flag_name(arg)
    if name is None:
        return Verdict(True, "a value")
    if name in REFUSED_FLAGS:
        return Verdict(False, REFUSED_FLAGS[name])
    if name in MEASUREMENT_FLAGS:
        return Verdict(True, "a measurement flag")
    near = difflib.get_close_matches(name, sorted(MEASUREMENT_FLAGS), n=1, cutoff=0.8)
    return Verdict(False, "not on lbench's list of flags known safe for a measurement"
                   + (f" (did you mean {near[0]}?)" if near else ""))


def env_verdict(name: str) -> Verdict:
    """Whether the environment variable ``name`` may be set for a server."""
    key = str(name).upper()
    if reserved.reserved_env(key):
        return Verdict(False, "reserved: lbench sets the address, port and model itself")
    for prefix, why in REFUSED_ENV.items():
        if key == prefix or (prefix.endswith("_") and key.startswith(prefix)):
            return Verdict(False, why)
    if key.startswith("LLAMA_ARG_"):
        return Verdict(key[len("LLAMA_ARG_"):] in LLAMA_ARG_ENV,
                       "the variable of a measurement flag" if key[len("LLAMA_ARG_"):] in LLAMA_ARG_ENV
                       else "not on lbench's list of variables known safe for a measurement")
    if key in ALLOWED_ENV or key.startswith(ALLOWED_ENV_PREFIXES) or is_selection_var(key):
        return Verdict(True, "a tuning or device selection variable")
    return Verdict(False, "not on lbench's list of variables known safe for a measurement")


def _refuse(what: str, verdict: Verdict, where: str) -> BadInput:
    if verdict.reason.startswith("reserved"):
        hint = "drop it; choose the model with --model; the port is never needed (lbench talks to the server itself)"
    elif what.startswith("environment variable"):
        hint = ("drop it; a person who needs it passes it knowingly with --unsafe-server-env NAME=VALUE on the "
                "command line (recorded in the manifest; never read from a spec or claim file)")
    else:
        hint = ("drop it; a person who needs it passes it knowingly with --unsafe-server-arg on the command line "
                "(recorded in the manifest; never read from a spec or claim file)")
    return BadInput(f"{what} is refused: it {verdict.reason}" if not verdict.reason.startswith(("reserved", "not "))
                    else f"{what} is refused: {verdict.reason}", where=where, hint=hint)


def check_args(args: Iterable[object] | None, where: str) -> None:
    """Refuse extra server arguments that are not on the allow-list (exit 2, the reason)."""
    for arg in args or ():
        verdict = flag_verdict(str(arg))
        if not verdict.allowed:
            raise _refuse(repr(arg)[:200], verdict, where)


def check_env(env: Mapping[str, object] | Iterable[str] | None, where: str) -> None:
    """Refuse environment variables for a server that are not on the allow-list."""
    for key in (env or {}):
        verdict = env_verdict(str(key))
        if not verdict.allowed:
            raise _refuse(f"environment variable {str(key)[:100]}", verdict, where)


def check_preset_keys(keys: Iterable[object] | None, where: str) -> None:
    """Refuse router preset keys (a flag without its dashes, or its variable) not on the allow-list."""
    for key in keys or ():
        k = str(key).strip()
        verdict = env_verdict(k) if k.upper().startswith("LLAMA_") else flag_verdict(("-" if len(k) <= 5 else "--") + k)
        if not verdict.allowed and not k.upper().startswith("LLAMA_"):
            other = flag_verdict(("--" if len(k) <= 5 else "-") + k)  # -ngl and --threads alike
            verdict = other if other.allowed else verdict
        if not verdict.allowed:
            raise _refuse(f"preset key {k[:100]!r}", verdict, where)


def check_unsafe_args(args: Iterable[object] | None, where: str = "--unsafe-server-arg") -> None:
    """Arguments a person passed knowingly: only the loopback rule applies."""
    reserved.check_args(list(args or ()), where)


MAX_ENV_VALUE = 4096


def _is_env_name(name: str) -> bool:
    try:
        shell.env_name(name)
        return True
    except ValueError:
        return False


def parse_unsafe_env(items: Iterable[object] | None, where: str = "--unsafe-server-env") -> dict[str, str]:
    """Environment variables a person passed knowingly (``NAME=VALUE`` each) as a mapping: only the
    loopback rule applies (a variable that sets the address, port or model is refused all the same)."""
    out: dict[str, str] = {}
    for item in items or ():
        text = str(item)
        name, sep, value = text.partition("=")
        if not sep or not _is_env_name(name):
            raise BadInput(f"bad --unsafe-server-env {text[:100]!r}", where=where,
                           hint="NAME=VALUE, e.g. --unsafe-server-env LD_PRELOAD=/opt/trace/libtrace.so")
        if reserved.reserved_env(name):
            raise BadInput(f"environment variable {name} is reserved: lbench sets the address, port and model itself "
                           "(servers bind 127.0.0.1 only, on a port lbench picks, with the model it resolved)",
                           where=where, hint=f"drop {name}; no option passes it (the loopback rule has no override)")
        if not value.isprintable() or len(value) > MAX_ENV_VALUE:
            raise BadInput(f"bad value for {name}: {value[:50]!r}", where=where,
                           hint=f"printable characters, at most {MAX_ENV_VALUE}")
        if name in out:
            raise BadInput(f"{name} given twice", where=where, hint=f"one --unsafe-server-env {name}=VALUE")
        out[name] = value
    return out


def unsafe_warning(args: Iterable[object] | None, env: Iterable[object] | None) -> str | None:
    """The line a run prints at its start when something passed knowingly past the allow-list: each
    argument and variable with what it does (None when nothing did)."""
    words = [str(a) for a in args or ()]
    why = [f"{w}: {flag_verdict(w).reason}" for w in words if not flag_verdict(w).allowed]
    parts = [f"server arguments {shell.join(words)}" + (f" ({'; '.join(why)})" if why else "")] if words else []
    parts += [f"{name}={shell.quote(value)} ({env_verdict(name).reason})"
              for name, value in parse_unsafe_env(env).items()]
    if not parts:
        return None
    return ("warning: passed knowingly past lbench's server allow-list (--unsafe-server-arg / --unsafe-server-env; "
            "recorded in the manifest): " + "; ".join(parts))


START_WHERE = ("{what} start: the allow-list, applied again where the server starts (the option or file it came "
               "through should have refused it first)")


def check_start(args: Iterable[object], env_names: Iterable[str], *, unsafe_args: Iterable[object] = (),
                unsafe_env: Mapping[str, str] | None = None, what: str = "llama-server") -> None:
    """Defence in depth where a server is started: ``args`` and ``env_names`` (what lbench was given for
    it, lbench's own address, port and model apart) must be on the allow-list; ``unsafe_args`` and
    ``unsafe_env`` (the recorded overrides) only obey the loopback rule.  Refused: ``BadInput``, and
    the caller starts nothing."""
    where = START_WHERE.format(what=what)
    check_unsafe_args(unsafe_args, where)
    parse_unsafe_env([f"{k}={v}" for k, v in (unsafe_env or {}).items()], where)
    check_args(args, where)
    check_env([n for n in env_names if n not in (unsafe_env or {})], where)
