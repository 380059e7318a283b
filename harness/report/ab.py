"""Context for an ``ab`` gate job's report and evidence: the verdict with its interval, the A/A
floor beside it, the interleaved rounds with per-round ratios, both builds and the model, and a
script that reruns the job.  Everything comes from the job's ``analysis.json``
(harness/analysis/ab.py), its manifest's ``ab`` section and its own tables."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt

from harness import shell
from harness.report.html import data_uri
from harness.report.plots import figure_png, plain
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
            "plot": data_uri(rounds_png(list(analysis.get("per_round") or []), final, run.run_id)),
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


def rounds_png(per_round: list[dict], final: list[dict], run_id: str) -> bytes:
    """Per gated group, each round's B / A and A/A / A ratios (log scale) with the final look's
    intervals as bands: a verdict and its noise floor side by side."""
    groups = list(dict.fromkeys(str(r.get("group")) for r in per_round))
    fig, axes = plt.subplots(1, max(len(groups), 1), figsize=(4.6 * max(len(groups), 1), 3.2), squeeze=False)
    for ax, group in zip(axes[0], groups):
        rows = [r for r in per_round if str(r.get("group")) == group]
        for key, name, colour in (("b_over_a", "B vs A", "tab:red"), ("aa_over_a", "A/A", "tab:blue")):
            pts = [(r["round"], r[key]) for r in rows if isinstance(r.get(key), (int, float)) and r[key] > 0]
            if pts:
                ax.plot(*zip(*pts), "o", ms=4, color=colour, alpha=0.8, label=f"{name} per round")
            for c in final:
                if c.get("group") == group and c.get("contrast") == name:
                    ax.axhspan(c["ratio_ci_low"], c["ratio_ci_high"], color=colour, alpha=0.15,
                               label=f"{name} {c['ratio']:.3f} [{c['ratio_ci_low']:.3f}, {c['ratio_ci_high']:.3f}]")
        ax.axhline(1.0, color="0.3", lw=0.8)
        ax.set_yscale("log")
        ax.set_title(plain(group), fontsize=9)
        ax.set_xlabel("round")
        ax.set_ylabel("ratio to A (log)")
        ax.legend(fontsize=7, loc="best")
    fig.suptitle(plain(f"gate job {run_id}: per-round ratios, the final look's intervals shaded"), fontsize=9)
    return figure_png(fig)
