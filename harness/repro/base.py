"""What every claim scenario is built from: the context it runs in, the evidence it returns,
its typed parameters, the evidence tables it writes, and the steps the router scenarios share.

A scenario is a function ``(Context, Params) -> Evidence``: named figures (what the claim's
checks compare), the log lines that show them, and notes.  A scenario that cannot set up the
situation it needs (say, a model that finished loading before it could be frozen) raises
``Inconclusive``.  Scenario modules import this module only; ``harness.repro.registry`` maps
scenario names to (function, parameter class).

Parameters: each scenario declares a frozen dataclass derived from ``Params`` whose fields
and defaults are the spec's ``[params]`` table; ``Params.from_toml`` checks names and types
(``BadInput``, exit 2, before anything runs) with harness/typed_toml.py, the reader specs and
claims go through too.

Evidence tables (``events``, ``memory``, ``requests``, ``samples``) are written in the store's
schema (harness/schema.py, docs/schema.md) as ``<table>.parquet`` in the claim's directory, for
the reader (lbench itself reads none of them back).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness.engines.binary import Binary
from harness.engines.router import RouterModel
from harness import typed_toml
from harness.models.resolve import ResolvedModel
from harness.repro.figures import PEAK_CHILDREN, Figure, Given, Unmeasured
from harness.repro.lab import EVENT_WAIT_S, Lab
from harness.repro.recipe import write_lab_recipe
from harness.schema import apply_schema
from harness.analysis.swap_served import with_inferred_evictions, with_repeated_evictions_marked


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

    def router_models(self, refs: list[str], **per_model: dict[str, Any]) -> list[RouterModel]:
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
            **kw: Any) -> Iterator[Lab]:
        """The router scenarios' skeleton: a ``Lab`` (the router, its timeline and sampler) over
        ``models``; with ``evidence``, the lab's events and memory samples are saved as evidence
        tables when the block ends normally, before the router stops (``save_evidence``).  A
        block that raises (``Inconclusive``) saves nothing, as before.  ``run_dir``: a folder of
        its own (a scenario with several routers); the lab is listed in ``labs`` before its router
        starts, so one that never came up still gets its recipe."""
        lab = Lab(self.binary, models, run_dir or self.claim_dir, **kw)
        self.labs.append(lab)
        try:
            with lab:
                yield lab
                if evidence is not None:
                    save_evidence(lab, evidence)
        finally:
            write_lab_recipe(lab)


# ---- typed parameters -----------------------------------------------------------------------

@dataclass(frozen=True)
class Params:
    """Base of every scenario's parameters (a frozen dataclass of the spec's ``[params]``)."""

    @classmethod
    def from_toml(cls, raw: Mapping[str, object], where: str = "params") -> "Params":
        return typed_toml.load(cls, raw, where, prefix="params.", noun="parameter",
                               fix="fix the claim spec's [params] (TOML)")


@dataclass(frozen=True)
class ModelsParams(Params):
    """Parameters of a scenario over the spec's ``models``; its own class adds its knobs.  ``env``:
    the router's environment variables (``router_scenario`` passes them on; never one lbench
    reserves, engines/reserved.py), e.g. ``env = { LLAMA_SERVER_DEBUG_FAKE_TIMING = "1" }``."""
    models: list[str]
    env: dict[str, str] = field(default_factory=dict, kw_only=True)  # keyword only: subclasses' fields keep their places


@dataclass(frozen=True)
class RouterParams(Params):
    """The parameters most router scenarios share: the lab's ``ctx_size`` (``router_scenario``
    passes it on) and the long generation's ``n_predict`` (None: the scenario's default)."""
    models: list[str] = field(default_factory=lambda: ["tiny-q8", "tiny-q4"])
    ctx_size: int = 4096
    n_predict: int | None = None
    env: dict[str, str] = field(default_factory=dict, kw_only=True)  # as ModelsParams.env

    def long_n(self, default: int = 4000) -> int:
        """Tokens of the long generation that keeps a model busy."""
        return default if self.n_predict is None else self.n_predict


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
    ev.figures.setdefault("peak_children", PEAK_CHILDREN.value(lab))


# ---- figures, each declared once (harness/repro/figures.py) ------------------------------------

def measure(ev: Evidence, lab: Lab, **figures: Figure) -> None:
    """Each figure's value into ``ev.figures`` (what lbench judges) and its shell command into the
    lab's recipe (what the script judges), from the one object that declares both."""
    for name, fig in figures.items():
        ev.figures[name] = fig.value(lab)
        if isinstance(fig, Given):
            lab.given_figure(name, fig.setting)
        elif isinstance(fig, Unmeasured):
            lab.unmeasurable(name, fig.how)
        else:
            differs = getattr(fig, "differs", "")
            lab.figure(name, fig.shell(lab), f"{fig.how} (differs from lbench: {differs})" if differs else fig.how)


# ---- scenarios: registration and the router scenarios' skeleton ---------------------------------

P = TypeVar("P", bound=Params)
Run = Callable[[Context, Any], Evidence]
DECLARED: dict[str, tuple[Run, type[Params], str]] = {}  # scenario name -> (function, parameters, module)


def scenario(name: str, params: type[P]) -> Callable[[Callable[[Context, P], Evidence]],
                                                      Callable[[Context, P], Evidence]]:
    """Declare ``(Context, params) -> Evidence`` as scenario ``name`` (harness.repro.registry)."""
    def declare(fn: Callable[[Context, P], Evidence]) -> Callable[[Context, P], Evidence]:
        if name in DECLARED:
            raise RuntimeError(f"scenario {name!r} is declared by {DECLARED[name][2]} and {fn.__module__}")
        DECLARED[name] = (fn, params, fn.__module__)
        return fn
    return declare


Steps = Callable[[Lab, P, Evidence], Iterator[None]]


def router_scenario(name: str, params: type[P], *, per_model: Callable[[P], dict[str, dict[str, Any]]] | None = None,
                    **lab_settings: object) -> Callable[[Steps[P]], Callable[[Context, P], Evidence]]:
    """The router scenarios' skeleton, owned here: resolve ``p.models`` (``per_model(p)``: their
    preset keys), open a lab over them with ``lab_settings`` (a value may be a function of the
    parameters: ``sleep_idle_seconds=lambda p: p.sleep_idle_seconds``; a ``RouterParams``' ``ctx_size``
    goes to the lab unless given), run the body's steps up to its ``yield``
    with the router up, save the evidence tables, stop the router, run the rest of the body
    (the figures, from the finished timeline), return the evidence.  The body is a generator
    ``(lab, p, ev)``; declared as scenario ``name``."""
    def wrap(steps: Steps[P]) -> Callable[[Context, P], Evidence]:
        def run(ctx: Context, p: P) -> Evidence:
            models = ctx.router_models(list(vars(p)["models"]), **(per_model(p) if per_model else {}))
            ev = Evidence()
            settings: dict[str, Any] = {k: v(p) if callable(v) else v for k, v in lab_settings.items()}
            if isinstance(p, RouterParams):
                settings.setdefault("ctx_size", p.ctx_size)
            env = dict(getattr(p, "env", {}) or {})
            if env:  # the claim's own variables, after the scenario's (the loopback rule: claims.check_params)
                settings["extra_env"] = {**settings.get("extra_env", {}), **env}
            with ctx.lab(models, evidence=ev, **settings) as lab:
                body = steps(lab, p, ev)
                next(body, None)
            for _ in body:
                pass
            return ev
        run.__name__, run.__doc__, run.__qualname__ = steps.__name__, steps.__doc__, steps.__qualname__
        run.__module__ = steps.__module__
        return scenario(name, params)(run)
    return wrap


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


def long_request_busy(lab: Lab, model: str, n_predict: int) -> threading.Thread:
    """Start a long generation on ``model``; return its thread once the router has proxied it.  The
    router log reaches the timeline through a reader thread, so the proxy lines of requests already
    answered (any HTTP status: a child's error was proxied too) may still be on their way: they are
    waited for (up to 10 s; one the router answered itself has none) and counted first, and the
    long request's line is the next one (a late line taken for it would let the steps go on with
    ``model`` idle)."""
    answered = sum(1 for r in lab.replies if r.model == model and r.status is not None)
    seen = lab.lines_seen("proxy", model, at_least=answered)
    thread = lab.request_in_background(model, n_predict, ignore_eos=True)
    if lab.wait_for_next("proxy", model, seen, timeout=EVENT_WAIT_S) is None:
        raise Inconclusive(f"the long request to {model} was never proxied")
    return thread


def loaded_and_busy(lab: Lab, model: str, n_predict: int) -> threading.Thread:
    """Load ``model`` with one request, then keep it busy with a long generation of ``n_predict`` tokens."""
    lab.request(model)
    return long_request_busy(lab, model, n_predict)


class ChildGone(Inconclusive):
    """The child looked for was evicted, stopped or exited (the router logged it) before it was found."""


def found_child(lab: Lab, model: str, timeout: float = EVENT_WAIT_S, gone_after: float | None = None) -> int:
    """The PID of ``model``'s child, waited for until it appears in /proc (``Lab.child_pid``).
    ``ChildGone`` as soon as the router logs its end after lab time ``gone_after`` (given when the
    child is known to have been spawned already); Inconclusive when it is not found within ``timeout``."""
    pid = lab.child_pid(model, timeout, gone_after=gone_after)
    if pid is None:
        ended = lab.child_gone(model, gone_after) if gone_after is not None else None
        if ended is not None:
            raise ChildGone(f"{model}'s child ended before it could be found (the router logged: "
                            f"{ended.text.strip()[:160]})")
        raise Inconclusive(f"{model}'s child was not found within {timeout:g} s")
    return pid


def freeze_while_loading(lab: Lab, model: str) -> int:
    """Freeze ``model``'s child (SIGSTOP) during its load; Inconclusive when it came up first."""
    pid = found_child(lab, model)
    lab.freeze(pid)
    lab.sleep(0.3)
    if any(e.kind == "status:loaded" and e.model == model for e in lab.events):
        lab.thaw(pid)
        raise Inconclusive(f"{model} finished loading before it could be frozen; use a bigger model")
    return pid


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
        return int(with_repeated_evictions_marked(with_inferred_evictions(events))["kind"].eq("evict").sum())
    evict_lines = int((events["kind"] == "evict").sum())
    unload_stops = int(((events["kind"] == "stop_sent")
                        & events["text"].astype(str).str.contains("unload: stopping model instance")).sum())
    return max(evict_lines, unload_stops)
