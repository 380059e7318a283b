"""The type of a kind of run, and the one registry of the kinds that every layer reads.

A kind of run (idle, calibrate, swap, repro, gate-bench, ab) is one ``RunKind``: its facts (name,
title, template, the table the runs listing counts, what it compares as, flags) and its parts, each a
function where it lives: the spec class, ``prepare`` and ``execute`` (harness/runs/), the summary that
is ``analysis.json`` and the columns the analysis derives (harness/analysis/), the report context and
the evidence section (harness/report/), and how the history archive files its runs (harness/history/).
Each kind is one module of ``harness/kinds/``, and ``harness/kinds/__init__.py`` holds the one list.

That package sits above the runs layer (it names functions of every layer), so the layers below
cannot import it: they read the kinds here, a leaf, where the package registers its list
(``register``) when a program installs it (``harness.kinds.install()``: the CLI does it as a command
starts, never for ``--help``; tests/conftest.py does it for the tests).  A program that reads runs
through the lower layers alone, with nothing registered, gets a ``RuntimeError`` that says so, never a
silent empty analysis.  ``tests/test_kinds.py`` checks every kind has each part and that no module
outside ``harness/kinds/`` compares a run's kind with a kind's name or keeps a table of kinds.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import BadInput

if TYPE_CHECKING:  # types only (the layers contract leaves these out): the leaf imports nothing of lbench to run
    import pandas as pd

    from harness.record import RunRecord
    from harness.runs.idle import Reporter
    from harness.store import Run


@dataclass(frozen=True)
class RunOptions:
    """What a command passes to every kind's ``prepare`` besides the spec (None: the default)."""

    llama_server: str | None = None  # the engine binary (path, or a build resolved by the command)
    results: str | None = None  # the results root (--results)
    llama_idle: str | None = None  # idle: the in-process reference binary
    engine_options: dict[str, Any] = field(default_factory=dict)  # idle: engine knobs from the command line
    binary: Any = None  # repro: the resolved engine Binary


# prepare(spec, options, reporter): every bad-input check of a run (exit 2) before its run directory exists;
# returns what execute takes
Prepare = Callable[[Any, RunOptions, "Reporter"], Any]
# execute(prepared, reporter): measures inside a RunSession and returns the finished run
Execute = Callable[[Any, "Reporter"], "Run"]


@dataclass(frozen=True, kw_only=True)
class HistoryView:
    """How the history archive (harness/history/catalog.py) files a kind's runs; None: nothing of that."""

    metrics: Callable[[RunRecord, dict], list[dict]] | None = None  # metric rows from the run's analysis
    table_metrics: Callable[[list[Path], pd.DataFrame], tuple[list[dict], list[str]]] | None = None
    # ^ metric rows from the tables of all the runs a refresh adds, given their analysis' rows: (rows, failures)
    settings: Callable[[RunRecord], list[str]] | None = None  # the setting labels when the record names no cells


@dataclass(frozen=True, kw_only=True)
class RunKind:
    """One kind of run: its facts and its parts."""

    name: str
    title: str  # what the evidence calls a run of this kind
    template: str  # in reports/templates
    primary_table: str  # the table the runs listing counts
    compare_as: str | None = None  # runs of kinds with the same value can be compared (None: not comparable)
    features: frozenset[str] = frozenset()  # the HTTP floor (http_floor); a sweep of pauses with wake figures (pause_sweep)
    latest_compares: bool = False  # 'latest' in compare/gate may pick it (calibrate runs compare as idle, by id only)
    spec_class: Callable[..., Any]  # what ``prepare`` takes: a class (a ``part``: ``resolve(kind.spec_class)``)
    prepare: Prepare
    execute: Execute
    summarize: Callable[[Run], dict]  # the content of the run's analysis.json (harness/analysis/persisted.py)
    derive: Callable[[dict[str, pd.DataFrame]], dict[str, pd.DataFrame]] | None = None
    # ^ the raw tables with the columns the analysis adds (a swap run's requests.served_as)
    context: Callable[[Run, dict], dict]  # what the kind's template shows: context(run, analysis)
    section: Callable[[Run, dict, Path], tuple[str, list[str]]]  # its part of an evidence bundle: (Markdown, files)
    history: HistoryView = HistoryView()


class Part:
    """A kind's part named ``module:attribute``, imported when it is first called (or ``resolve``d), so the
    kinds' modules stay light: a command that only lists runs reads the kinds' facts and loads none of the
    layers their parts live in (``lbench runs`` loads no pandas). ``tests/test_kinds.py`` resolves every part."""

    def __init__(self, target: str) -> None:
        module, _, attribute = target.partition(":")
        if not module or not attribute:
            raise ValueError(f"a part is 'module:attribute', got {target!r}")
        self.target = target
        self._module, self._attribute = module, attribute

    @functools.cached_property
    def value(self) -> Any:
        return getattr(importlib.import_module(self._module), self._attribute)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.value(*args, **kwargs)

    def __repr__(self) -> str:
        return f"part({self.target!r})"


def part(target: str) -> Any:
    """``Part(target)``, typed as what it stands for (a function or a class of the layer it names)."""
    return Part(target)


def resolve(value: Any) -> Any:
    """What a part stands for (a value that is not a part: itself)."""
    return value.value if isinstance(value, Part) else value


_KINDS: dict[str, RunKind] = {}


def register(kinds: Iterable[RunKind]) -> None:
    """Make ``kinds`` the kinds lbench knows (harness/kinds/__init__.py calls it with its list)."""
    named: dict[str, RunKind] = {}
    for kind in kinds:
        if kind.name in named:
            raise ValueError(f"two kinds of run are named {kind.name!r}")
        named[kind.name] = kind
    _KINDS.clear()
    _KINDS.update(named)


def registered() -> Mapping[str, RunKind]:
    """The kinds lbench knows, by name, in the list's order."""
    if not _KINDS:
        raise RuntimeError("no kinds of run are registered: call harness.kinds.install() before reading or "
                           "starting runs through the layers below the CLI (the lbench command does it)")
    return _KINDS


def find_kind(name: object) -> RunKind | None:
    """The kind named ``name`` (a manifest's ``kind``: any value), or None when lbench knows none."""
    return registered().get(name) if isinstance(name, str) else None


def unknown_kind(name: object) -> tuple[str, str]:
    """What a ``BadInput`` for an unknown kind says: (what, hint)."""
    return f"unknown run kind {name!r}", f"lbench knows: {', '.join(registered())}"


def get_kind(name: object, where: str = "") -> RunKind:
    """The kind named ``name``; an unknown kind is bad input (exit 2)."""
    kind = find_kind(name)
    if kind is None:
        what, hint = unknown_kind(name)
        raise BadInput(what, where=where or None, hint=hint)
    return kind


def latest_kinds_to_compare(other_side: Collection[str] = ()) -> frozenset[str]:
    """The kinds 'latest' may pick on one side of compare or gate: those of the runs the other side
    names (compare an idle baseline with the newest idle run, a swap one with the newest swap
    run), else every kind marked ``latest_compares`` (never a calibrate run by accident)."""
    if other_side:
        return frozenset(other_side)
    return frozenset(k.name for k in registered().values() if k.latest_compares)
