"""Context for an ``ab`` gate job's report and evidence: the verdict with its interval, the A/A
floor beside it, the interleaved rounds with per-round ratios, both builds and the model, and a
script that reruns the job.  Everything comes from the job's ``analysis.json``
(harness/analysis/ab.py), its manifest's ``ab`` section and its own tables."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness import shell
from harness.schema import records
from harness.store import Run

VERDICT_WORDS = {"pass": "no slowdown: B is no slower than A in every gated group",
                 "fail": "slower: B is slower than A",
                 "inconclusive": "inconclusive: the data cannot tell within the budget",
                 "unproven": "unproven on this machine: the in-job A/A floor does not vouch for a verdict"}


def mapping(value: object) -> Mapping[str, Any]:
    """A manifest's value where a table is expected: itself when it is one, else empty (untrusted input)."""
    return value if isinstance(value, Mapping) else {}


def side_facts(section: Mapping[str, Any], arm: str) -> dict[str, Any]:
    """One side's build (version, build number, commit, sha256), extra arguments and models."""
    side = mapping(mapping(section.get("sides")).get(arm))
    binary = mapping(side.get("binary"))
    models = [m for m in side.get("models") or [] if isinstance(m, Mapping)]
    return {"build": binary.get("build_number"), "version": binary.get("version"), "commit": binary.get("commit"),
            "sha256": binary.get("sha256"), "backend": binary.get("backend"), "path": binary.get("path"),
            "extra_args": " ".join(str(a) for a in side.get("extra_args") or []),
            "models": [{"label": m.get("label"), "sha256": m.get("sha256"), "bytes": m.get("bytes"),
                        "synthetic": m.get("synthetic")} for m in models]}


def ab_context(run: Run, analysis: dict) -> dict:
    section = run.record.section("ab")
    design = mapping(section.get("design"))
    status = str(analysis.get("status") or "inconclusive")
    final = list(analysis.get("final_look") or [])
    return {"run": run.record, "run_id": run.run_id, "incomplete": not run.complete, "status": status,
            "verdict_words": VERDICT_WORDS.get(status, status), "findings": list(analysis.get("findings") or []),
            "b_rows": [c for c in final if c.get("contrast") == "B vs A"],
            "aa_rows": [c for c in final if c.get("contrast") == "A/A"],
            "per_round": list(analysis.get("per_round") or []), "looks": records(run.table("looks")),
            "design": {k: v for k, v in design.items() if not isinstance(v, (list, dict))} | {
                "arms": ",".join(str(a) for a in design.get("arms") or []),
                "gated pauses (s)": ", ".join(f"{float(p):g}" for p in design.get("gated_pauses") or [])},
            "side_a": side_facts(section, "a"), "side_b": side_facts(section, "b"),
            "host": run.record.host.facts, "engine": {}}


def rerun_script(run: Run, command: str) -> str:
    """A script that reruns the job with the recorded command; the builds it compared, as comments."""
    section = run.record.section("ab")
    lines = ["#!/usr/bin/env bash", shell.comment(f"Rerun lbench ab gate job {run.run_id}: the same design, "
                                                  "interleaved rounds, the A/A arm."),
             "# Build both llama-server binaries at the commits below first; pass their paths as in the command.",
             "set -euo pipefail"]
    for arm, title in (("a", "A (base)"), ("b", "B (head)")):
        f = side_facts(section, arm)
        lines.append(shell.comment(f"{title}: llama.cpp build {f['build']} ({f['version']}), commit {f['commit']}, "
                                   f"llama-server sha256 {f['sha256']}, backend {f['backend']}"))
        for m in f["models"]:
            lines.append(shell.comment(f"{title} model {m['label']}: sha256 {m['sha256']}"))
    lines += [command, ""]
    return "\n".join(lines)
