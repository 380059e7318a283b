"""What every claim scenario is built from: the context it runs in, the evidence it returns,
its typed parameters, the evidence tables it writes, and the steps the router scenarios share.

A scenario is a function ``(Context, Params) -> Evidence``: named figures (what the claim's
checks compare), the log lines that show them, and notes.  A scenario that cannot set up the
situation it needs (say, a model that finished loading before it could be frozen) raises
``Inconclusive``.  Scenario modules import this module only; ``harness.repro.registry`` maps
scenario names to (function, parameter class).

Parameters: each scenario declares a frozen dataclass derived from ``Params`` whose fields
and defaults are the spec's ``[params]`` table; ``Params.from_toml`` checks names and types
(``BadInput``, exit 2, before anything runs).  ``get``/``[]``/``in`` read fields by name, so
older scenario bodies written against the dict read the same values.

Evidence tables (``events``, ``memory``, ``requests``, ``samples``) are written in the store's
schema (harness/schema.py, docs/schema.md) as ``<table>.parquet`` in the claim's directory;
``read_evidence_table`` reads them, and the ``<table>.csv`` of runs made before.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness.engines.binary import Binary
from harness.engines.router import RouterModel
from harness.errors import BadInput
from harness.models.resolve import ResolvedModel
from harness.repro.lab import Lab
from harness.schema import apply_schema


class Inconclusive(Exception):
    """The scenario could not create the situation the claim is about."""


@dataclass
class Evidence:
    figures: dict = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Context:
    binary: Binary
    claim_dir: Path
    resolve: Callable[[str], ResolvedModel]
    labs: list[Lab] = field(default_factory=list)  # the labs ``lab`` opened (their recipes get the checks)
    # scenarios without a router lab: each writes its recipe.sh given (spec, lbench's verdict for the repetition)
    recipe_writers: list[Callable[..., None]] = field(default_factory=list)

    def router_models(self, refs: list[str], **per_model) -> list[RouterModel]:
        names: dict[str, int] = {}
        out = []
        for i, ref in enumerate(refs):
            m = self.resolve(ref)
            names[m.label] = names.get(m.label, 0) + 1
            name = m.label if names[m.label] == 1 else f"{m.label}-{names[m.label]}"
            extra = per_model.get(name, per_model.get(str(i), {}))
            out.append(RouterModel(name, m.path, extra.get("stop_timeout_s"),
                                   tuple((k, str(v)) for k, v in extra.get("preset", {}).items())))
        return out

    @contextmanager
    def lab(self, models: list[RouterModel], evidence: "Evidence | None" = None, run_dir: Path | None = None,
            **kw) -> Iterator[Lab]:
        """The router scenarios' skeleton: a ``Lab`` (the router, its timeline and sampler) over
        ``models``; with ``evidence``, the lab's events and memory samples are saved as evidence
        tables when the block ends normally, before the router stops (``save_evidence``).  A
        block that raises (``Inconclusive``) saves nothing, as before.  ``run_dir``: a folder of
        its own (a scenario with several routers); the lab is listed in ``labs`` before its router
        starts, so one that never came up still gets its recipe."""
        lab = Lab(self.binary, models, run_dir or self.claim_dir, **kw)
        self.labs.append(lab)
        with lab:
            yield lab
            if evidence is not None:
                save_evidence(lab, evidence)


# ---- typed parameters -----------------------------------------------------------------------

@dataclass(frozen=True)
class Params:
    """Base of every scenario's parameters (a frozen dataclass of the spec's ``[params]``)."""

    @classmethod
    def from_toml(cls, raw: dict, where: str = "params") -> "Params":
        hints = typing.get_type_hints(cls)
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(raw) - set(names))
        if unknown:
            raise BadInput(f"unknown parameter(s) {', '.join(unknown)} for this scenario", where=where,
                           hint=f"known: {', '.join(names) or '(none)'}")
        values = {}
        for name, value in raw.items():
            values[name] = _checked(value, hints[name], f"params.{name}", where)
        missing = [f.name for f in dataclasses.fields(cls)
                   if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                   and f.name not in values]
        if missing:
            raise BadInput(f"missing parameter(s) {', '.join(missing)}", where=where)
        return cls(**values)

    # dict-style reads, for scenario bodies written against the old dict
    def get(self, name: str, default=None):
        value = getattr(self, name, None)
        return default if value is None else value

    def __getitem__(self, name: str):
        if getattr(self, name, None) is None:
            raise KeyError(name)
        return getattr(self, name)

    def __contains__(self, name: str) -> bool:
        return getattr(self, name, None) is not None

    def as_dict(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


def _checked(value, hint, name: str, where: str):
    """``value`` converted to ``hint`` (int -> float allowed), or BadInput."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _checked(value, a, name, where)
            except BadInput as exc:
                errors.append(str(exc).splitlines()[0])
        raise BadInput(f"{name} has the wrong type: {value!r}", where=where,
                       hint=" or ".join(_type_word(a) for a in args if a is not type(None)))
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise BadInput(f"{name} must be a list, not {value!r}", where=where)
        return (tuple if origin is tuple else list)(_checked(v, args[0], f"{name}[{i}]", where)
                                                     for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise BadInput(f"{name} must be a table, not {value!r}", where=where)
        return {str(k): _checked(v, args[1], f"{name}.{k}", where) for k, v in value.items()}
    if hint is typing.Any:
        return value
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint is int and isinstance(value, bool) or not isinstance(value, hint):
        raise BadInput(f"{name} must be {_type_word(hint)}, not {value!r}", where=where)
    return value


def _type_word(hint) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(
        hint, getattr(hint, "__name__", str(hint)))


@dataclass(frozen=True)
class RouterParams(Params):
    """The parameters most router scenarios share."""
    models: list[str] = field(default_factory=lambda: ["tiny-q8", "tiny-q4"])
    ctx_size: int = 4096
    n_predict: int | None = None


# ---- evidence tables in the store's schema ---------------------------------------------------

EVIDENCE_TABLES = ("events", "memory", "requests", "samples")


def write_evidence_table(frame: pd.DataFrame, directory: Path, table: str) -> Path:
    """``<table>.parquet`` in ``directory``, with the store's schema for ``table`` applied
    (``run_id`` is the run the claim directory belongs to)."""
    if table not in EVIDENCE_TABLES:
        raise ValueError(f"not an evidence table: {table}")
    frame = frame.copy()
    if "detail" in frame and frame["detail"].map(lambda v: isinstance(v, (dict, list))).any():
        frame["detail"] = frame["detail"].map(lambda v: json.dumps(v) if isinstance(v, (dict, list)) else v)
    frame["run_id"] = _run_id(directory)
    out = directory / f"{table}.parquet"
    apply_schema(frame, table).to_parquet(out, index=False)
    return out


def read_evidence_table(directory: Path, table: str) -> pd.DataFrame:
    """An evidence table of a claim directory: ``<table>.parquet``, else the ``<table>.csv`` older
    runs wrote; the schema applied either way.  Missing: an empty frame with the schema's columns."""
    parquet, csv = directory / f"{table}.parquet", directory / f"{table}.csv"
    if parquet.is_file():
        frame = pd.read_parquet(parquet)
    elif csv.is_file():
        frame = pd.read_csv(csv)
    else:
        frame = pd.DataFrame()
    return apply_schema(frame, table)


def _run_id(directory: Path) -> str | None:
    """The run id of a claim directory (``<run>/claims/<id>[/rep-N]``), None elsewhere."""
    parts = directory.resolve().parts
    if "claims" in parts:
        at = len(parts) - 1 - parts[::-1].index("claims")
        return parts[at - 1] if at >= 1 else None
    return None


def save_evidence(lab: Lab, ev: Evidence) -> None:
    """The lab's events and memory samples as evidence tables; ``peak_children`` into the figures."""
    write_evidence_table(lab.event_frame(), lab.run_dir, "events")
    write_evidence_table(lab.memory_frame(), lab.run_dir, "memory")
    ev.figures.setdefault("peak_children", lab.peak_children())


# ---- steps the router scenarios share --------------------------------------------------------

def children_from_log(events: list) -> dict:
    """Children count by the router log's line order: +1 at each ``spawn``, -1 at each ``exited``.
    Not exact: the ``exited`` line is written by the child's monitor thread and can follow the spawn
    line of the model that was waiting for that exit (seen on build 11434)."""
    alive, peak, order = 0, 0, []
    for e in events:
        if e.source != "router" or e.kind not in ("spawn", "exited"):
            continue
        alive += 1 if e.kind == "spawn" else -1
        peak = max(peak, alive)
        order.append((e.kind, e.model, alive))
    return {"peak_children_log": peak, "log_order": order}


def spawns_over_cap(order: list[tuple[str, str, int]], models_max: int) -> int:
    """Spawns that made more than ``models_max`` children alive by the log's own order."""
    return sum(1 for kind, _, alive in order if kind == "spawn" and models_max > 0 and alive > models_max)


def long_request_busy(lab: Lab, model: str, n_predict: int):
    """Start a long generation on ``model``; return its thread once the router has proxied it."""
    after = lab.now()
    thread = lab.request_in_background(model, n_predict, ignore_eos=True)
    if lab.wait_for("proxy", model, timeout=30, after=after) is None:
        raise Inconclusive(f"the long request to {model} was never proxied")
    return thread


def loaded_and_busy(lab: Lab, model: str, p, default_n: int = 4000):
    """Load ``model`` with one request, then keep it busy with a long generation."""
    lab.request(model)
    return long_request_busy(lab, model, int(p.get("n_predict", default_n)))


def scheduler_evictions(events: pd.DataFrame) -> int:
    """Children the router's scheduler stopped to make room.  Builds log it differently: 11434
    "evicting idle LRU ... for a queued request" (``evict``); 10327 "went idle, giving up its slot"
    and "evicting idle LRU ... to make room", several lines for one child, or only "unload: stopping
    model instance"; 9093 "removing LRU" then "unload: stopping".  With the timeline (``model``,
    ``t_s``) each evicted child counts once (the swap analysis's rules); without it, the larger of
    the eviction lines and the "unload: stopping" lines.  Only for scenarios where lbench never
    unloads a model itself."""
    if events.empty:
        return 0
    if {"model", "t_s"} <= set(events.columns):
        from harness.analysis.swap_served import with_inferred_evictions, with_repeated_evictions_marked

        return int(with_repeated_evictions_marked(with_inferred_evictions(events))["kind"].eq("evict").sum())
    evict_lines = int((events["kind"] == "evict").sum())
    unload_stops = int(((events["kind"] == "stop_sent")
                        & events["text"].astype(str).str.contains("unload: stopping model instance")).sum())
    return max(evict_lines, unload_stops)
