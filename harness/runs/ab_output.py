"""The gate job's verdict as CI and people read it: Markdown (the step summary), JUnit XML, JSON and
the terminal's lines, made from the job's ``analysis.json`` (harness/analysis/ab.py) and manifest.
Every verdict says whether it was made on a virtual machine; home paths and names are redacted
as ``lbench gate``'s artefacts are."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from harness.probes.host import virtual_status
from harness.report.ab import VERDICT_WORDS
from harness.report.redact import Redactor
from harness.store import Run


@dataclass(frozen=True)
class GateJobTexts:
    markdown: str
    junit: str
    json: str
    lines: list[str]


def _ratio(c: dict) -> str:
    return f"{c['ratio']:.3f} [{c['ratio_ci_low']:.3f}, {c['ratio_ci_high']:.3f}]"


def gate_job_outputs(run: Run, analysis: dict) -> GateJobTexts:
    status = str(analysis.get("status") or "inconclusive")
    outcome = analysis.get("outcome") or {}
    final = list(analysis.get("final_look") or [])
    virtual = virtual_status([run.record.host.facts])
    context = [virtual["note"]] if virtual["note"] else []
    words = VERDICT_WORDS.get(status, status)
    lines = [*context, f"verdict: {words}", f"why: {outcome.get('reason', '')}",
             f"rounds: {outcome.get('rounds', 0)} of {outcome.get('planned_rounds', 0)} planned, "
             f"{outcome.get('elapsed_s', 0)} s"]
    lines += [f"{c['group']}, {c['contrast']}: {_ratio(c)}, {c['verdict']} (margin ±{c['margin']:.1%})" for c in final]
    md = [f"### lbench ab: {words}", "", *[f"> {c}" for c in context], "",
          f"Job `{run.run_id}`: {outcome.get('reason', '')}; {outcome.get('rounds', 0)} rounds "
          f"({outcome.get('elapsed_s', 0)} s), each running A, B and the A/A copy of A on fresh servers in a "
          "randomised balanced order.", "", "| group | contrast | ratio [interval] | margin | verdict |",
          "|---|---|---|---|---|"]
    md += [f"| {c['group']} | {c['contrast']} | {_ratio(c)} | ±{c['margin']:.1%} | {c['verdict']} |" for c in final]
    md += ["", f"Evidence: `lbench evidence {run.run_id} -o evidence/`", ""]
    suite = ET.Element("testsuite", name="lbench ab", tests=str(max(len(final), 1)),
                       failures=str(sum(c["verdict"] == "slower" and c["contrast"] == "B vs A" for c in final)))
    props = ET.SubElement(suite, "properties")
    for name, value in (("run_id", run.run_id), ("status", status), ("virtual", str(virtual["virtual"]))):
        ET.SubElement(props, "property", name=name, value=value)
    for c in final or [{"group": "gate job", "contrast": "", "verdict": status}]:
        case = ET.SubElement(suite, "testcase", classname="lbench.ab", name=f"{c['group']} {c['contrast']}".strip())
        if c.get("verdict") == "slower" and c.get("contrast") == "B vs A":
            ET.SubElement(case, "failure", message=f"slower: {_ratio(c)}")
        elif status in ("inconclusive", "unproven") and c.get("contrast") != "A/A":
            ET.SubElement(case, "skipped", message=f"{status}: {outcome.get('reason', '')}")
    data = {"status": status, "verdict": words, "reason": outcome.get("reason"), "run_id": run.run_id,
            "rounds": outcome.get("rounds"), "planned_rounds": outcome.get("planned_rounds"),
            "elapsed_s": outcome.get("elapsed_s"), "contrasts": final, "run_ids": outcome.get("run_ids", {}),
            "per_round": analysis.get("per_round", []), "virtual": virtual}
    red, red_xml = Redactor(True, runs=[run]), Redactor(True, runs=[run], xml=True)
    return GateJobTexts(red("\n".join(md)), red_xml(ET.tostring(suite, encoding="unicode")),
                        red(json.dumps(data, indent=2, default=str)), lines)
