"""Any knob as an axis: environment variables, sets of server arguments, prompt lengths.

``--env-axis GGML_VK_KEEPALIVE_MS=unset,30000`` makes one cell per value (``unset``: the variable
is removed from the server's environment, whatever lbench's own environment holds);
``--server-args-axis none --server-args-axis "--cache-reuse 256"`` one cell per set of arguments
(``none``: no extra argument); ``--prompt-tokens 0,512`` one cell per prompt length (0: the
one-token cached decode; N: N new tokens evaluated after the pause, engines/prompt_eval.py).
Each is subject to the server allow-list (engines/server_policy.py, which applies the loopback rule
of engines/reserved.py first): a variable or argument that sets the address, port or model, loads
code, runs commands, connects off the machine or is not known to be safe for a measurement is
refused before a run directory exists.

The Metal ``--keep-alive`` axis is one instance of the env axis: each value is the environment it
sets (``keep_alive_env``: ``none`` is ``GGML_METAL_NO_RESIDENCY=1``, N is
``GGML_METAL_RESIDENCY_KEEP_ALIVE_S=N``, ``default`` sets nothing), expanded with the env axes
(``env_cells``), checked by the same loopback rule, applied to the server by the same loop
(``Setting.knob_env``) and recorded like them (``axis_knobs``, ``env_overrides``).  It keeps its option,
its label (``keep-alive=none``) and its manifest and sample field (``keep_alive``), so older runs read
as before; engines that are not llama.cpp read ``Setting.keep_alive`` their own way (Ollama: the
per-request ``keep_alive``) or say it has no effect.
"""

from __future__ import annotations

import itertools
import re
import shlex

from harness.engines import server_policy
from harness.engines.base import NO_ARGS, keep_alive_env
from harness.errors import BadInput

UNSET = "unset"
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_AXIS_VALUES = 100
MAX_PROMPT_TOKENS = 1 << 16
# set by other axes of lbench (each has its own option); an env axis naming one would fight it
OWNED_ENV = {"GGML_METAL_NO_RESIDENCY": "--keep-alive", "GGML_METAL_RESIDENCY_KEEP_ALIVE_S": "--keep-alive",
             "OMP_WAIT_POLICY": "--omp-wait-policy", "GOMP_SPINCOUNT": "--omp-spincount"}


def parse_env_axis(item: object, where: str = "--env-axis") -> tuple[str, list[str | None]]:
    """``"NAME=v1,v2"`` -> (NAME, [v1, v2]); the value ``unset`` becomes None."""
    text = str(item).strip()
    name, sep, values = text.partition("=")
    name = name.strip()
    if not sep or not ENV_NAME.match(name):
        raise BadInput(f"bad env axis {text!r}"[:300], where=where,
                       hint="NAME=value1,value2 (unset: not in the server's environment), "
                            "e.g. --env-axis GGML_VK_KEEPALIVE_MS=unset,30000")
    server_policy.check_env({name: None}, where)
    if name in OWNED_ENV:
        raise BadInput(f"{name} is set by lbench's {OWNED_ENV[name]} axis", where=where,
                       hint=f"use {OWNED_ENV[name]} instead")
    out: list[str | None] = []
    for v in (v.strip() for v in values.split(",")):
        if not v:
            raise BadInput(f"empty value in env axis {text!r}"[:300], where=where,
                           hint="write 'unset' for a variable that is not set")
        if not v.isprintable() or len(v) > 4096:
            raise BadInput(f"bad value {v[:50]!r} in env axis {name}", where=where)
        out.append(None if v.lower() == UNSET else v)
    if len(out) > MAX_AXIS_VALUES:
        raise BadInput(f"{len(out)} values in env axis {name}, more than {MAX_AXIS_VALUES}", where=where)
    return name, list(dict.fromkeys(out))


KEEP_ALIVE_VALUES = ("default", "none")  # besides seconds > 0


def parse_keep_alive(value: object, where: str = "--keep-alive") -> str:
    """One value of the keep-alive axis: ``default``, ``none`` or seconds > 0 (``30s`` -> ``30``)."""
    v = str(value).strip().lower()
    if v in KEEP_ALIVE_VALUES:
        return v
    if v.endswith("s"):
        v = v[:-1]
    if v.isdigit() and int(v) > 0:
        return str(int(v))
    raise BadInput(f"bad keep-alive value {value!r}"[:300], where=where,
                   hint="use 'default', 'none' (GGML_METAL_NO_RESIDENCY=1) or seconds > 0, e.g. 30")


def keep_alive_axis(values: list[str], where: str = "--keep-alive") -> list[tuple[str, tuple[tuple[str, str | None], ...]]]:
    """The keep-alive axis as an env axis: per value, the Metal residency variables it sets
    (``Setting.knob_env``; ``default`` sets none, and lbench removes every ``GGML_METAL_*`` of its own
    environment from the server's anyway), each checked by the loopback rule every env axis passes."""
    out = []
    for value in dict.fromkeys(parse_keep_alive(v, where) for v in values or ["default"]):
        pairs = keep_alive_env(value)
        server_policy.check_env(dict(pairs), where)
        out.append((value, pairs))
    return out


def parse_server_args_value(item: object, where: str = "--server-args-axis") -> tuple[str, ...]:
    """One value of the server-args axis: ``none`` or a shell-quoted argument list."""
    text = str(item).strip()
    if text.lower() in ("", NO_ARGS):
        return (NO_ARGS,)
    try:
        args = tuple(shlex.split(text))
    except ValueError as exc:
        raise BadInput(f"bad server arguments {text!r}: {exc}"[:300], where=where,
                       hint="quote them as in a shell, e.g. --server-args-axis='--cache-reuse 256'") from None
    server_policy.check_args(args, where)
    return args


def parse_prompt_tokens(value: object, where: str = "--prompt-tokens") -> int:
    if isinstance(value, bool):
        raise BadInput(f"bad prompt length {value!r}", where=where)
    try:
        n = int(str(value).strip())
    except ValueError:
        raise BadInput(f"bad prompt length {value!r}", where=where,
                       hint="new tokens per request: 0 (one-token cached decode) or N, e.g. --prompt-tokens 0,512") \
            from None
    if not 0 <= n <= MAX_PROMPT_TOKENS:
        raise BadInput(f"prompt length must be 0..{MAX_PROMPT_TOKENS}, got {n}", where=where)
    return n


def env_axes(items: list) -> list[tuple[str, list[str | None]]]:
    axes = [parse_env_axis(i) for i in items]
    names = [n for n, _ in axes]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise BadInput(f"env axis {dup} given twice", where="--env-axis", hint=f"one --env-axis {dup}=a,b,c")
    return axes


def env_settings(items: list) -> list[tuple[tuple[str, str | None], ...]]:
    """Every combination of the env axes (one tuple of (NAME, value) per cell; [()] when none)."""
    axes = env_axes(items)
    return [tuple(zip([n for n, _ in axes], combo)) for combo in itertools.product(*(v for _, v in axes))] or [()]


def env_cells(keep_alive: list[str], items: list) -> list[tuple[str, tuple[tuple[str, str | None], ...]]]:
    """The keep-alive axis and the env axes expanded together, keep-alive outermost: per cell the
    keep-alive value and the env axes' (NAME, value) pairs (the keep-alive's own variables are
    derived from its value where the server is started: ``Setting.knob_env``)."""
    return [(k, env) for k, _ in keep_alive_axis(keep_alive) for env in env_settings(items)]


def n_env_settings(items: list, keep_alive: list[str] | None = None) -> int:
    n = max(len(keep_alive or []), 1)
    for _, values in env_axes(items):
        n *= len(values)
    return n
