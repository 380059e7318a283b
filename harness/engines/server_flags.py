"""Extra llama-server arguments and context sizes, checked before a run starts (issue 12, class 9).

The flags a llama-server binary takes are read from its own ``--help`` (parsed once per
binary, cached by path, size and mtime), so an unknown ``--server-arg`` is bad input (exit 2,
nothing written) instead of a server that exits while starting.  A context size must be a
positive integer no larger than ``MAX_CTX`` and, where the GGUF says it, than the context the
model was trained for (``<arch>.context_length``): a huge KV cache is allocated before the
first request, so an absurd value would eat memory instead of failing.
"""

from __future__ import annotations

import difflib
import re
import subprocess
from pathlib import Path

from harness.engines import server_policy
from harness.errors import BadInput
from harness.filecache import FileKeyedCache

MAX_CTX = 1 << 24  # 16M tokens: above any model's trained context
HELP_CACHE = FileKeyedCache("server-flags-cache")
CTX_FLAGS = ("-c", "--ctx-size")
_HEAD = re.compile(r"(?<![,\s])\s{2,}")  # the flag column ends at the first wide gap not after a comma
_FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
_NUMBER = re.compile(r"^-\d|^-\.\d")


def parse_help(text: str) -> set[str]:
    """Every flag a ``--help`` text lists: lines that start with ``-``, up to the description."""
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith("-"):
            flags.update(_FLAG.findall(_HEAD.split(line, maxsplit=1)[0]))
    return flags


def known_flags(binary: Path) -> set[str] | None:
    """The flags ``binary --help`` lists; None when it cannot be asked (then nothing is checked)."""
    cached = HELP_CACHE.get(binary)
    if cached is not None:
        return set(cached)
    try:
        done = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL, errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return None
    flags = parse_help(done.stdout + "\n" + done.stderr)
    if done.returncode != 0 or len(flags) < 20:  # not a help text lbench can read
        return None
    HELP_CACHE.put(binary, sorted(flags))
    return flags


def flag_name(arg: str) -> str | None:
    """The flag an argument names (``--x=1`` -> ``--x``), None for a value (``8``, ``-1``, ``x.gguf``)."""
    if not arg.startswith("-") or arg == "-" or _NUMBER.match(arg):
        return None
    return arg.split("=", 1)[0]


def check_server_args(binary: Path, args: list[str], where: str = "--server-arg") -> None:
    """Every flag in ``args`` must be one ``binary`` knows."""
    flags = [f for f in map(flag_name, args) if f is not None]
    if not flags:
        return
    known = known_flags(binary)
    if known is None:
        return
    unknown = [f for f in flags if f not in known]
    if unknown:
        close = {u: difflib.get_close_matches(u, sorted(known), n=2, cutoff=0.7) for u in unknown}
        hints = " ".join(f"{u}: did you mean {' or '.join(c)}?" for u, c in close.items() if c)
        raise BadInput(f"llama-server does not know {', '.join(unknown)}", where=f"{where} ({binary})",
                       hint=(hints + " " if hints else "") + f"(`{binary.name} --help` lists the flags it takes)")


def ctx_from_args(args: list[str]) -> int | str | None:
    """The value of the last ``-c`` / ``--ctx-size`` in ``args`` (it wins over lbench's own)."""
    value = None
    for i, arg in enumerate(args):
        name = flag_name(arg)
        if name in CTX_FLAGS:
            if "=" in arg:
                value = arg.split("=", 1)[1]
            elif i + 1 < len(args):
                value = args[i + 1]
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return value


def check_ctx(ctx: int | str, where: str, model: str | None = None, n_ctx_train: int | None = None) -> None:
    """A context size: an integer in [1, MAX_CTX] and, when known, <= the model's trained context."""
    if isinstance(ctx, bool) or not isinstance(ctx, int) or not 1 <= ctx <= MAX_CTX:
        raise BadInput(f"context size must be an integer from 1 to {MAX_CTX}, got {ctx!r}", where=where,
                       hint="e.g. --ctx-size 2048")
    if n_ctx_train and ctx > n_ctx_train:
        raise BadInput(f"context size {ctx} is larger than the {n_ctx_train} tokens model {model} was trained "
                       f"for", where=where, hint=f"use --ctx-size {n_ctx_train} or less (the model's "
                                                 "context_length in its GGUF metadata)")


def check_run(binary: Path | None, ctx_size: int, server_args: list[str],
              models: list[tuple[str, int | None]], axis_args: list[list[str]] | None = None,
              unsafe_args: list[str] | None = None) -> None:
    """A run's llama-server arguments: on the allow-list (engines/server_policy.py; ``unsafe_args``,
    passed knowingly, obey the loopback rule only), known to ``binary`` (its ``--help``), those of
    every server-args axis value (``axis_args``) alike; and the context size that takes effect (a
    ``-c`` among them wins; 0 means the model's own) within bounds for every model (``models``:
    label, trained context or None)."""
    server_policy.check_args(server_args, "--server-arg")
    server_policy.check_unsafe_args(unsafe_args)
    for args in axis_args or []:
        server_policy.check_args(args, "--server-args-axis")
    if binary is not None:
        check_server_args(binary, server_args)
        check_server_args(binary, list(unsafe_args or []), "--unsafe-server-arg")
        for args in axis_args or []:
            check_server_args(binary, args, "--server-args-axis")
    in_args = ctx_from_args(server_args)
    ctx, where = (ctx_size, "--ctx-size") if in_args is None else (in_args, "--server-arg -c/--ctx-size")
    if ctx == 0:
        return
    check_ctx(ctx, where)
    for label, n_ctx_train in models:
        check_ctx(ctx, where, label, n_ctx_train)
