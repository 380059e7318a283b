"""``lbench repro``: run each claim's scenario on the real engine and judge it.

One run directory; each claim gets ``claims/<id>/`` (its router logs, events.csv,
memory.csv) and one row in ``verdicts`` (journaled as it is decided).
"""

from __future__ import annotations

import json
import platform
import subprocess
import time
import traceback
from functools import lru_cache

from harness import paths
from harness.engines import provision
from harness.engines.llama_server import Binary
from harness.models.resolve import resolve
from harness.probes.host import host_facts
from harness.repro.claims import ERROR, NOT_CHECKABLE, ClaimSpec, gate, judge
from harness.repro.scenarios import SCENARIOS, Context, Inconclusive
from harness.runs.idle import QuietReporter, Reporter
from harness.store import Run, RunWriter, open_run


def engine_backend(binary: Binary) -> str:
    """The backend the binary was built with: lbench's stamp, else what it lists."""
    plan = provision.plan_build()
    stamp = provision.read_stamp(plan)
    if stamp and binary.path == plan.binary("llama-server").resolve():
        return stamp["backend"]
    try:
        out = subprocess.run([str(binary.path), "--list-devices"], capture_output=True, text=True, timeout=30)
        text = out.stdout + out.stderr
    except (OSError, subprocess.TimeoutExpired):
        text = ""
    for name in ("CUDA", "Metal", "Vulkan"):
        if name in text:
            return name.lower()
    return "metal" if platform.system() == "Darwin" and platform.machine() == "arm64" else "cpu"


def execute_repro(claims: list[ClaimSpec], binary: Binary, *, results: str | None = None,
                  reporter: Reporter = QuietReporter()) -> Run:
    backend = engine_backend(binary)
    writer = RunWriter(paths.results_dir(results), "repro", {
        "config": {"claims": [c.id for c in claims]},
        "host": host_facts(),
        "engine": {"engine": "llama-server", "backend": backend, **binary.as_dict()},
        "claims": [{"id": c.id, "claim": c.claim, "source": c.source, "scenario": c.scenario,
                    "requires": c.requires, "params": c.params, "check": [r.describe() for r in c.check],
                    "spec": str(c.path)} for c in claims],
    })
    reporter.message(f"run {writer.run_id} -> {writer.dir} (engine backend: {backend})")
    resolve_once = lru_cache(maxsize=None)(lambda ref: resolve(ref, progress=reporter.model_progress,
                                                               announce=reporter.message))
    reporter.cell("claims", len(claims))
    status = "complete"
    try:
        for spec in claims:
            claim_dir = writer.dir / "claims" / spec.id
            claim_dir.mkdir(parents=True)
            started = time.perf_counter()
            figures, lines, notes = {}, [], []
            reason = gate(spec, backend)
            if reason:
                verdict = NOT_CHECKABLE
            else:
                try:
                    ev = SCENARIOS[spec.scenario](Context(binary, claim_dir, resolve_once), spec.params)
                    figures, lines, notes = ev.figures, ev.lines, ev.notes
                    verdict, reason = judge(spec, figures)
                except Inconclusive as exc:
                    verdict, reason = NOT_CHECKABLE, f"the scenario could not set it up: {exc}"
                except KeyboardInterrupt:
                    raise
                except Exception as exc:  # one broken claim must not stop the others
                    verdict, reason = ERROR, f"{type(exc).__name__}: {exc}"
                    (claim_dir / "traceback.txt").write_text(traceback.format_exc())
            writer.append({
                "claim_id": spec.id, "claim": spec.claim, "seed": spec.source.get("seed") or spec.source.get("document"),
                "statement": spec.source.get("statement"), "verdict": verdict, "reason": reason,
                "figures": json.dumps(figures, default=str), "evidence": json.dumps(lines),
                "notes": json.dumps(notes), "seconds": round(time.perf_counter() - started, 2),
                "evidence_dir": f"claims/{spec.id}",
            }, table="verdicts")
            reporter.message(f"{spec.id}: {verdict} — {reason}")
            reporter.advance()
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    except BaseException:
        status = "failed"
        raise
    finally:
        writer.finish(status)
    return open_run(writer.dir, paths.results_dir(results))
