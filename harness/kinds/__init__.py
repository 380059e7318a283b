"""The kinds of run, one module each, and the one list of them.

Each module here says everything about one kind in one ``RunKind`` (harness/runkind.py), named
``KIND``: its facts and its parts, each a function where it lives (runs/, analysis/, report/,
history/).  Adding a kind is one module in this folder and one line in ``KINDS``.

``install()`` registers the list with the leaf registry the layers below read (they cannot import
this package, which sits above the runs layer): the CLI calls it when a command runs (never for
``--help``), tests/conftest.py for the tests, and a program that uses the lower layers directly
calls it first.  ``get(name)`` is the kind a command starts (an unknown name is bad input, exit 2).
"""

from __future__ import annotations

from harness.kinds import ab, calibrate, gate_bench, idle, repro, swap
from harness.runkind import RunKind, get_kind, register

KINDS: tuple[RunKind, ...] = (
    idle.KIND,
    calibrate.KIND,
    swap.KIND,
    repro.KIND,
    gate_bench.KIND,
    ab.KIND,
)


def install() -> None:
    """Register ``KINDS`` as the kinds lbench knows (again: the same list, no harm)."""
    register(KINDS)


def get(name: object, where: str = "") -> RunKind:
    """The kind named ``name``, the list installed; an unknown kind is bad input (exit 2)."""
    install()
    return get_kind(name, where)
