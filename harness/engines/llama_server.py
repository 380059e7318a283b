"""The real llama-server: start it for one model under one setting, and talk to it.

Finding the binary is ``engines/binary.py``; the loopback address and ports ``engines/loopback.py``;
the lean one-token client every engine uses ``engines/one_token.py``.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path


from harness.engines import devices, processes, reserved, server_policy
from harness.engines.base import Completion, EngineDefaults, Setting
from harness.engines.binary import Binary, locate  # noqa: F401  (where engines and commands found them before)
from harness.engines.loopback import HOST, free_port
from harness.engines.devices import DeviceChoice
from harness.engines.one_token import OneTokenClient
from harness.engines.prompt_eval import PromptEvalClient
from harness.engines.prompts import IDLE_PROMPT
from harness.engines.readiness import wait_until_ready
from harness.errors import BadInput, EngineError
from harness.probes.engine_log import list_devices
from harness.probes import residency

# llama-server settings that must never leak in from the user's environment
SCRUBBED_ENV_PREFIXES = ("LLAMA_ARG_", "GGML_METAL_")
SCRUBBED_ENV = ("LLAMA_SERVER_DEBUG_FAKE_TIMING", "LLAMA_CACHE", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT",
                "OMP_NUM_THREADS", "OMP_THREAD_LIMIT")
STRAY_CONFIGS = (Path("/etc/llama.cpp/config.ini"), Path.home() / ".config" / "llama.cpp" / "config.ini")
DEFAULT_PROMPT = IDLE_PROMPT
# What llama-idle (examples/idle/idle.cpp) does per iteration, read from the pinned source:
# llama_context_default_params() with n_ctx = n_batch = 512 (so -t is ignored: 4 threads,
# GGML_DEFAULT_N_THREADS), one BOS token decoded at position 0 after llama_memory_clear,
# logits for that token only, no sampling; it times llama_process + llama_synchronize.
LLAMA_IDLE_WORK = {"threads": "4 (fixed in its source; --threads N caps it with OMP_THREAD_LIMIT=N in an "
                              "OpenMP build)", "threads_batch": 4, "n_ctx": 512, "n_batch": 512, "n_ubatch": 512,
                   "flash_attn": "auto", "prompt": "[BOS] (1 token)", "kv_position": 0,
                   "kv_cache": "cleared before every decode (llama_memory_clear)", "sampling": "none",
                   "threadpool": "no ggml threadpool attached: ggml_graph_compute makes a disposable one per graph; "
                                 "in an OpenMP build that is an omp parallel region on libgomp's persistent team",
                   "timed": "llama_process + llama_synchronize (decode only)", "warmup": "1 decode"}
MATCH_ARGS = ["-t", "4", "-tb", "4", "-c", "512", "-b", "512", "-ub", "512", "-fa", "auto"]
MATCH_SAMPLING = {"top_k": 1, "samplers": ["top_k"]}
# where the server path cannot do exactly what llama-idle does
MATCH_GAPS = [
    "prompt_ms starts when the slot starts the prompt (prompt/cache bookkeeping, batch build) and ends after the "
    "first token is sampled; llama-idle times the decode only. Sampling is cut to greedy top-k=1 (one pass "
    "over the vocabulary), which remains.",
    "the server attaches one ggml threadpool for its lifetime; llama-idle attaches none. In an OpenMP build both "
    "run their graphs on libgomp's persistent team (same spin-then-sleep wait), so this differs only in builds "
    "without OpenMP, where llama-idle starts and joins its threads on every decode.",
    "the server re-decodes BOS at position 0 by dropping the cached token (cache_prompt keeps the prompt, the "
    "last token is always re-evaluated); llama-idle clears the whole memory. Same position, same KV length.",
    "the server was warmed up by its own start-up decode and lbench's warm-up requests; llama-idle by one decode.",
]


def stray_configs() -> list[str]:
    return [str(p) for p in STRAY_CONFIGS if p.exists()]


class LlamaServerEngine(EngineDefaults):
    name = "llama-server"
    binary: Binary  # always set: this engine runs the llama-server it was given

    def __init__(self, binary: Binary, *, ctx_size: int = 2048, extra_args: list[str] | None = None,
                 startup_timeout_s: float = 600.0, prompt: str = DEFAULT_PROMPT, match: str | None = None,
                 client_spin: bool = False, unsafe_args: list[str] | None = None,
                 unsafe_env: dict[str, str] | None = None):
        self.binary = binary
        self.ctx_size = ctx_size
        reserved.check_args(extra_args or [], "extra llama-server arguments")  # the loopback rule, here too
        self.extra_args = list(extra_args or [])
        # passed knowingly (--unsafe-server-arg / --unsafe-server-env, recorded): past the allow-list, not the
        # loopback rule; checked with everything else where a server starts (server_policy.check_start)
        self.unsafe_args = list(unsafe_args or [])
        self.unsafe_env = dict(unsafe_env or {})
        self.startup_timeout_s = startup_timeout_s
        self.prompt = prompt
        self.match = match  # "llama-idle": do llama-idle's per-iteration work (see LLAMA_IDLE_WORK)
        self.client_spin = client_spin

    def facts(self) -> dict:
        return {"engine": self.name, **self.binary.as_dict(), "ctx_size": self.ctx_size,
                "extra_args": [*self.extra_args, *self.unsafe_args], "stray_configs": stray_configs(),
                "devices": list_devices(self.binary.path), "openmp": openmp_build(self.binary.path),
                "match": self.match, **self.device_choice().facts()}

    def device_choice(self) -> DeviceChoice:
        """The devices its servers use (refused, exit 2, when a GPU build would see none)."""
        return devices.choose(self.binary.path, self.binary.backend, where=str(self.binary.path))

    def compute_threads(self, setting: Setting) -> int | None:
        """The compute threads a cell's server runs, when lbench sets them (None: the server's default)."""
        if setting.threads is not None:
            return setting.threads
        return int(MATCH_ARGS[MATCH_ARGS.index("-t") + 1]) if self.match == "llama-idle" else None

    def like_for_like(self) -> dict:
        """llama-idle's work and the server path's, side by side, for the manifest."""
        server = {"threads": "server default (-t: physical cores)", "n_ctx": self.ctx_size,
                  "n_batch": "server default (2048)", "prompt": f"{self.prompt!r} (cached; last token re-decoded)",
                  "sampling": "server default chain", "timed": "server prompt_ms (prompt start .. first token "
                  "sampled); client latency_ms adds HTTP and the harness"}
        if self.match == "llama-idle":
            server = {"threads": "4, or --threads N (then llama-idle gets OMP_THREAD_LIMIT=N: the same N)",
                      "threads_batch": "as threads", "n_ctx": 512, "n_batch": 512, "n_ubatch": 512,
                      "flash_attn": "auto", "prompt": "[BOS] as a token id (1 token)", "kv_position": 0,
                      "kv_cache": "cached BOS dropped and re-decoded at position 0", "sampling": MATCH_SAMPLING,
                      "timed": "server prompt_ms (prompt start .. first token sampled)", "server_args": MATCH_ARGS}
        return {"match": self.match, "llama-idle": LLAMA_IDLE_WORK, "llama-server": server,
                "cannot_match": MATCH_GAPS if self.match else
                ["no matching requested (--match llama-idle): threads, context, prompt and sampling differ"]}

    def metal_available(self) -> bool:
        """A Metal build (what the binary reports, engines/binary.py ``backend_of``: a CPU-only or unknown build
        gets no -lv 4 start and no residency verdict) on an Apple Silicon Mac, also under Rosetta
        (probes/residency.py ``apple_silicon``)."""
        return self.binary.backend == "metal" and platform.system() == "Darwin" and residency.apple_silicon()

    def residency(self, setting: Setting) -> dict | None:
        """Whether Metal residency sets are in effect for this cell, decided in one place
        (probes/residency.py ``decide_for``: macOS version, the SDK and architecture of the library that
        runs Metal), never from the log line; None off Metal."""
        if not self.metal_available():
            return None
        return residency.decide_for(self.binary.path, setting.keep_alive)

    def setting_notes(self, setting: Setting) -> list[str]:
        notes = []
        if setting.keep_alive != "default" and not self.metal_available():
            why = (f"this build's backend is {self.binary.backend} ({self.binary.backend_from}), not Metal"
                   if platform.system() == "Darwin" else
                   f"this host ({platform.system()} {platform.machine()}) has no Metal")
            notes.append(f"keep-alive={setting.keep_alive} sets a Metal residency variable; {why}, so it has no effect")
        state = self.residency(setting)
        if state is not None and state["note"]:
            notes.append(state["note"])
        platform_notes = apple_cpu_notes(setting) if platform.system() == "Darwin" else []
        notes += platform_notes
        openmp = openmp_build(self.binary.path)
        if setting.poll is not None and openmp is True:
            notes.append("--poll sets ggml's own threadpool polling; this build uses OpenMP (GGML_OPENMP_ENABLED), whose "
                         "threads wait per OMP_WAIT_POLICY/GOMP_SPINCOUNT instead, so --poll has no effect")
        if (setting.omp_wait is not None or setting.omp_spincount is not None) and openmp is False:
            notes.append("OMP_WAIT_POLICY/GOMP_SPINCOUNT only affect OpenMP builds; this build does not use OpenMP")
        return notes

    def set_context_size(self, n_ctx: int) -> None:
        self.ctx_size = n_ctx

    def startup_facts_log(self, model: Path, setting: Setting, log_path: Path) -> str | None:
        """On Metal, the facts a -lv 4 start prints (``verbose_startup_log``): a second start in the cell,
        kept for the fit (``offloaded A/B layers to GPU`` against ``recommendedMaxWorkingSetSize``: an 8B
        model on an 8 GB Mac runs split), which the default verbosity never prints
        (probes/engine_log.py); residency itself is decided from the machine, not
        from these lines.  Elsewhere None: the cell starts once, its facts read from the measured start."""
        return self.verbose_startup_log(model, setting, log_path) if self.metal_available() else None

    def verbose_startup_log(self, model_path: Path, setting: Setting, log_path: Path) -> str:
        """Start the server once at ``-lv 4`` (llama and ggml INFO lines are printed only there), stop it,
        return the log.  The measured server runs at the default verbosity: at ``-lv 4`` the server also
        writes trace lines for every request while it is timed (probes/engine_log.py)."""
        probe = LlamaServerEngine(self.binary, ctx_size=self.ctx_size, extra_args=[*self.extra_args, "-lv", "4"],
                                  startup_timeout_s=self.startup_timeout_s, prompt=self.prompt,
                                  unsafe_args=self.unsafe_args, unsafe_env=self.unsafe_env)
        with probe.start(model_path, setting, log_path):
            pass
        return log_path.read_text(errors="replace")

    def environment(self, setting: Setting) -> tuple[dict[str, str], dict[str, str]]:
        """(full env for the child, the overrides lbench applied)."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(SCRUBBED_ENV_PREFIXES) and k not in SCRUBBED_ENV}
        overrides: dict[str, str] = {}
        if setting.omp_wait is not None:
            overrides["OMP_WAIT_POLICY"] = setting.omp_wait.upper()
        if setting.omp_spincount is not None:
            overrides["GOMP_SPINCOUNT"] = str(setting.omp_spincount)
        # the env axes, --keep-alive's Metal residency variables among them (--env-axis NAME=unset,30000;
        # unset: removed); on a host without Metal they are set all the same and the cell says so
        for key, value in setting.knob_env():
            if value is None:
                env.pop(key, None)
            else:
                overrides[key] = value
        overrides.update(self.unsafe_env)  # --unsafe-server-env: no axis sets these names (spec.check_unsafe_env)
        env.update(overrides)
        return env, overrides

    def argv(self, model_path: Path, setting: Setting, port: int) -> list[str]:
        argv = [str(self.binary.path), "-m", str(model_path), "--host", HOST, "--port", str(port),
                "-np", "1", "-c", str(self.ctx_size), "--no-webui"]
        if self.match == "llama-idle":
            argv += MATCH_ARGS  # later options win in llama.cpp's parser: -c 512 replaces the one above
        if setting.sleep_idle_seconds is not None:
            argv += ["--sleep-idle-seconds", str(setting.sleep_idle_seconds)]
        argv += cpu_args(setting)
        argv += setting.extra_args()  # the server-args axis (checked like --server-arg)
        if setting.cpus is not None:
            taskset = shutil.which("taskset")
            if taskset is None:
                raise BadInput("CPU placement (--cpus) needs taskset (util-linux)", where="--cpus",
                               hint=cpu_placement_hint())
            argv = [taskset, "-c", setting.cpus, *argv]
        return argv + self.extra_args + self.unsafe_args

    def start(self, model_path: Path, setting: Setting, log_path: Path) -> "LlamaServerProcess":
        env, overrides = self.environment(setting)
        # defence in depth: what came from outside passes the allow-list here too, or nothing starts
        server_policy.check_start([*setting.extra_args(), *self.extra_args], overrides, unsafe_args=self.unsafe_args,
                                  unsafe_env=self.unsafe_env)
        last_error = None
        for _attempt in range(3):  # a free port can be taken between probe and bind
            port = free_port()
            server = LlamaServerProcess(self.argv(model_path, setting, port), env, port, log_path, self.prompt)
            server.client.spin = self.client_spin
            try:
                server.wait_ready(self.startup_timeout_s)
                if self.match == "llama-idle":
                    server.client.set_body(llama_idle_body(server.client.bos_token()))
                if setting.prompt_tokens:  # N new prompt tokens per request (engines/prompt_eval.py)
                    server.prompt_eval = PromptEvalClient(server.client, setting.prompt_tokens)
                return server
            except EngineError as exc:
                server.close()
                last_error = exc
                if "bind" not in server.log_tail().lower():
                    break
        assert last_error is not None
        raise last_error


def cpu_args(setting: Setting) -> list[str]:
    """llama-server options for the CPU wake knobs that are set."""
    args: list[str] = []
    if setting.threads is not None:
        args += ["-t", str(setting.threads), "-tb", str(setting.threads)]
    if setting.poll is not None:
        args += ["--poll", str(setting.poll)]
    if setting.cpu_strict is not None:
        args += ["--cpu-strict", "1" if setting.cpu_strict else "0"]
    if setting.prio is not None:
        args += ["--prio", str(setting.prio)]
    if setting.cpu_mask is not None:
        args += ["--cpu-mask", setting.cpu_mask]
    return args


def apple_cpu_notes(setting: Setting) -> list[str]:
    """CPU knobs ggml ignores on Apple platforms (pinned source, ggml-cpu.c: ``ggml_thread_apply_affinity``
    "Not supported on Apple platforms"; ``--prio`` below 0 maps to no change, "no way to set lower prio
    on Apple platforms")."""
    notes = []
    if setting.cpu_mask is not None or setting.cpu_strict:
        notes.append("--cpu-mask/--cpu-strict: ggml ignores CPU affinity on Apple platforms, so this setting "
                     "has no effect on a Mac")
    if setting.prio is not None and setting.prio < 0:
        notes.append(f"--prio {setting.prio}: ggml cannot lower a thread's priority on Apple platforms "
                     "(it runs at the normal priority)")
    return notes


def cpu_placement_hint() -> str:
    """What to do when --cpus cannot run (no taskset), per platform."""
    if platform.system() == "Darwin":
        return ("macOS has no taskset and ggml ignores CPU affinity on Apple platforms (--cpu-mask too): "
                "use --spec ci-gate-mac (one compute thread only; docs/ci.md)")
    return "install util-linux, or use --cpu-mask (compute threads only)"


def parse_openmp_cache(text: str) -> bool | None:
    """A CMakeCache.txt -> whether ggml was built with OpenMP.  ``GGML_OPENMP`` is only the request;
    ``GGML_OPENMP_ENABLED`` records whether ``find_package(OpenMP)`` found it (pinned source,
    ggml/src/CMakeLists.txt: Apple clang without libomp requests ON and gets OFF).  An old cache with
    the request only reads as unknown (None)."""
    requested = enabled = None
    for line in text.splitlines():
        if line.startswith(("GGML_OPENMP_ENABLED:", "GGML_OPENMP:")):
            value = line.split("=", 1)[1].strip().upper() in ("ON", "1", "TRUE", "YES")
            if line.startswith("GGML_OPENMP_ENABLED:"):
                enabled = value
            else:
                requested = value
    if enabled is not None:
        return enabled
    return False if requested is False else None


def openmp_build(binary: Path) -> bool | None:
    """Whether the engine was built with OpenMP (from the CMakeCache.txt of a cached build: in a parent
    folder or its build/; ``parse_openmp_cache``); None when unknown."""
    for cache in [c for parent in list(binary.parents)[:4]
                  for c in (parent / "CMakeCache.txt", parent / "build" / "CMakeCache.txt")]:
        if cache.is_file():
            return parse_openmp_cache(cache.read_text(errors="replace"))
    return None


def llama_idle_body(bos: int) -> dict:
    """The request that does llama-idle's per-iteration work: BOS at position 0, one token out."""
    return {"prompt": [bos], "n_predict": 1, "cache_prompt": True, **MATCH_SAMPLING,
            "response_fields": OneTokenClient.RESPONSE_FIELDS}


class LlamaServerProcess:
    """One running llama-server bound to 127.0.0.1, with a keep-alive client."""

    def __init__(self, argv: list[str], env: dict[str, str], port: int, log_path: Path, prompt: str):
        self.argv = argv
        self.port = port
        self.base_url = f"http://{HOST}:{port}"
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = log_path.open("ab")
        self.proc = processes.spawn(argv, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        self.client = OneTokenClient(self.base_url, prompt)
        self.prompt_eval: PromptEvalClient | None = None

    def log_tail(self, n: int = 40) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def wait_ready(self, timeout_s: float) -> None:
        wait_until_ready(f"{self.base_url}/health", what="llama-server", timeout_s=timeout_s, proc=self.proc,
                         log_path=self.log_path)

    def complete_one_token(self) -> Completion:
        if self.prompt_eval is not None:
            self.prompt_eval.next_body()  # a new prompt each request, built before the clock starts
        return self.client.complete_one_token()

    def floor(self, path: str = "/health") -> Completion:
        """One GET on the same connection, timed like a completion: the HTTP floor."""
        return self.client.get(path)

    def close(self) -> None:
        self.client.close()
        processes.stop(self.proc)
        self._log.close()

    def __enter__(self) -> "LlamaServerProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


