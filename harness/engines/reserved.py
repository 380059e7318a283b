"""The loopback rule: the arguments, environment variables and preset keys lbench sets itself.

lbench starts every server on 127.0.0.1, on a port it chose, with the model (and, for the
router, the preset) it resolved.  An extra argument that chose any of these (``--server-arg
--host --server-arg 0.0.0.0``, ``--b-arg --port=80``, ``server_args = ["-m", "x"]`` in a spec,
``LLAMA_ARG_HOST`` in a claim's environment, ``host = ::`` in a claim's preset keys) would
break the rule or make lbench wait on the wrong port, so each is refused as bad input (exit 2,
before any run directory exists) whatever option it came through.  Fetching a model from the
network (``-hf``, ``--model-url``, ...) is refused too: lbench's traffic is loopback only.

The flags are llama.cpp's (common/arg.cpp of the pinned build) and mlx_lm.server's; for a
``--long`` flag every prefix of a reserved one is refused as well (argparse, which mlx_lm.server
uses, takes ``--ho`` for ``--host``), and ``_`` counts as ``-`` (llama.cpp's parser does).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from harness.errors import BadInput

ADDRESS_FLAGS = ("--host", "--port", "--reuse-port")
MODEL_FLAGS = ("-m", "--model", "--models-dir", "--models-preset")
NETWORK_FLAGS = ("-mu", "--model-url", "-hf", "-hfr", "--hf-repo", "-hff", "--hf-file", "-hft", "--hf-token",
                 "-dr", "--docker-repo", "-mmu", "--mmproj-url", "--spec-draft-hf", "-hfd", "-hfrd",
                 "--hf-repo-draft")
RESERVED_FLAGS = frozenset(ADDRESS_FLAGS + MODEL_FLAGS + NETWORK_FLAGS)
RESERVED_ENV = frozenset({
    "LLAMA_ARG_HOST", "LLAMA_ARG_PORT", "LLAMA_ARG_REUSE_PORT", "LLAMA_ARG_MODEL", "LLAMA_ARG_MODELS_DIR",
    "LLAMA_ARG_MODELS_PRESET", "LLAMA_ARG_MODEL_URL", "LLAMA_ARG_HF_REPO",
    "LLAMA_ARG_HF_FILE", "LLAMA_ARG_DOCKER_REPO", "LLAMA_ARG_MMPROJ_URL", "LLAMA_ARG_SPEC_DRAFT_HF_REPO",
    "LLAMA_SERVER_ROUTER_PORT",
})
_LONG = sorted(f for f in RESERVED_FLAGS if f.startswith("--"))
NOT_RESERVED = frozenset({"--mmproj"})  # llama.cpp flags that are prefixes of reserved ones (--mmproj-url)
WHY = {**{f: "the address and port" for f in ADDRESS_FLAGS}, **{f: "the model and preset" for f in MODEL_FLAGS},
       **{f: "the model, fetched from the network" for f in NETWORK_FLAGS}}


def reserved_flag(arg: object) -> str | None:
    """The reserved flag ``arg`` names (``--host``, ``--host=0.0.0.0``, ``--ho``, ``--models_preset``),
    or None.  Flags are case-sensitive, as in llama.cpp and argparse."""
    if not isinstance(arg, str) or not arg.startswith("-"):
        return None
    name = arg.split("=", 1)[0]
    if name.startswith("--"):
        name = name.replace("_", "-")
        if name in RESERVED_FLAGS:
            return name
        if len(name) >= 3 and name not in NOT_RESERVED:  # a prefix argparse would expand: --ho, --mod, --models-p
            hit = next((f for f in _LONG if f.startswith(name)), None)
            if hit is not None:
                return hit
        return None
    return name if name in RESERVED_FLAGS else None


def check_args(args: Iterable[object], where: str) -> None:
    """Refuse ``args`` (extra server arguments) that set anything lbench reserves."""
    for arg in args or ():
        flag = reserved_flag(arg)
        if flag is not None:
            raise BadInput(f"{arg!r} is reserved: lbench sets {WHY[flag]} itself "
                           "(servers bind 127.0.0.1 only, on a port lbench picks, with the model it resolved)",
                           where=where, hint="drop it; choose the model with --model; the port is never "
                                             "needed (lbench talks to the server itself)")


def reserved_env(name: object) -> bool:
    """Whether the environment variable ``name`` sets what lbench reserves: the address, port, model or
    a model fetched from the network (any ``LLAMA_ARG_HOST*``, ``LLAMA_ARG_PORT*``, ``LLAMA_ARG_MODEL*``,
    ``LLAMA_ARG_HF*``, in any case: llama.cpp reads the upper-case name)."""
    key = str(name).upper()
    return key in RESERVED_ENV or key.startswith(("LLAMA_ARG_HF", "LLAMA_ARG_MODEL_", "LLAMA_ARG_HOST",
                                                  "LLAMA_ARG_PORT")) or key == "LLAMA_ARG_MODEL"


def check_env(env: Mapping[str, object] | None, where: str) -> None:
    """Refuse environment variables for a server that set what lbench reserves."""
    for key in (env or {}):
        if reserved_env(key):
            raise BadInput(f"environment variable {key} is reserved: lbench sets the address, port and model "
                           "itself", where=where, hint=f"drop {key}")


def check_preset_keys(keys: Iterable[object], where: str) -> None:
    """Refuse router preset keys (``host = ...``, ``LLAMA_ARG_PORT = ...``) that set what lbench
    reserves: a preset key is a flag without its dashes or its environment variable."""
    for key in keys or ():
        k = str(key).strip()
        if k.upper() in RESERVED_ENV or reserved_flag("--" + k) or reserved_flag("-" + k):
            raise BadInput(f"preset key {k!r} is reserved: lbench sets the address, port and model itself",
                           where=where, hint=f"drop {k!r}")
