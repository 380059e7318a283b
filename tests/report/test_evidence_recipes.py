"""The recipes ``lbench evidence`` pastes for a claim (harness/report/evidence.py): the claim's own
``recipe.sh``, or every repetition's in order, never a failed attempt's or a single router's of a
scenario whose own recipe runs them all."""

from __future__ import annotations

import json

from harness.report.evidence import write_evidence
from harness.store import RunWriter, open_run


def _repro_run(tmp_path, layout: dict[str, dict[str, str]]):
    """A repro run with one verdict row per claim and the recipe files ``layout`` names."""
    w = RunWriter(tmp_path, "repro", {"config": {"claims": list(layout)}, "host": {"os": "Linux"},
                                      "engine": {"path": "/x/llama-server", "build_number": 1}})
    for claim, files in layout.items():
        for rel, text in files.items():
            path = w.dir / "claims" / claim / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        w.append({"claim_id": claim, "claim": "c", "seed": "s", "statement": "st", "verdict": "holds", "cause": "",
                  "reason": "r", "checks": "[]", "repeats": 1, "source_ref": "", "models": "[]",
                  "figures": json.dumps({}), "evidence": "[]", "notes": "[]", "seconds": 1.0,
                  "evidence_dir": f"claims/{claim}"}, table="verdicts")
    w.finish("complete")
    return open_run(w.dir, tmp_path)


def test_every_repetition_of_a_repeated_claim_is_pasted_in_order(tmp_path):
    reps = {f"rep-{n}/recipe.sh": f"echo rep {n}\n" for n in (1, 2, 10)}
    run = _repro_run(tmp_path, {"timed": reps, "once": {"recipe.sh": "echo once\n",
                                                        "failed-attempt-1/recipe.sh": "echo failed\n"},
                                "two-routers": {"recipe.sh": "echo both\n", "control/recipe.sh": "echo control\n"}})
    md = write_evidence([run], tmp_path / "ev", redact=False).read_text()
    at = [md.index(f"echo rep {n}\n") for n in (1, 2, 10)]
    assert at == sorted(at)  # repetition order, not rep-1, rep-10, rep-2
    assert "Rerun without lbench (rep-2/recipe.sh, repetition 2 of 3)" in md
    assert "3 scripts, one per repetition" in md and "every check is met in every repetition" in md
    assert "echo once" in md and "echo failed" not in md
    assert "echo both" in md and "echo control" not in md


def test_a_run_from_before_the_combined_recipe_pastes_the_routers_recipes(tmp_path):
    run = _repro_run(tmp_path, {"old": {"control/recipe.sh": "echo control\n", "case/recipe.sh": "echo case\n"}})
    md = write_evidence([run], tmp_path / "ev", redact=False).read_text()
    assert md.index("echo case") < md.index("echo control")  # sorted by folder
