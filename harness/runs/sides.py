"""Both sides of ``lbench compare`` and ``lbench gate``: the runs named (``latest`` as the other side's
kind), and what a reader must know before the verdict (the comparability rule, a run on both sides,
settings that did not apply, a virtual machine)."""

from __future__ import annotations

from harness import baselines, paths
from harness.errors import BadInput
from harness.runkind import latest_kinds_to_compare
from harness.probes.host import virtual_status
from harness.record import check_comparable
from harness.store import LATEST, Run


def resolve_sides(a_refs: list[str] | None, b_refs: list[str] | None, results: str | None
                  ) -> tuple[list[Run], list[Run]]:
    """Both sides of compare/gate.  Named runs first; then 'latest' means the newest run of the kind
    the other side holds (an idle baseline: the newest idle run, not a later calibrate run)."""
    root = paths.results_dir(results)
    sides = {"baseline": list(a_refs or []), "candidate": list(b_refs or [])}
    for side, refs in sides.items():
        if not refs:
            raise BadInput(f"no {side} run given", hint="give run ids, directories, 'latest' or baseline:NAME")
    named = {side: {i: baselines.resolve_run(ref, root) for i, ref in enumerate(refs) if ref not in LATEST}
             for side, refs in sides.items()}
    resolved = {}
    for side, refs in sides.items():
        other = "candidate" if side == "baseline" else "baseline"
        kinds = latest_kinds_to_compare({r.record.kind for r in [*named[side].values(),
                                                                          *named[other].values()]})
        resolved[side] = [named[side][i] if i in named[side] else baselines.resolve_run(ref, root, kinds=kinds)
                          for i, ref in enumerate(refs)]
    return resolved["baseline"], resolved["candidate"]


def side_warnings(a: list[Run], b: list[Run]) -> list[str]:
    """The comparability rule (harness/record.py ``check_comparable``): runs pooled on one side
    that are not repetitions of one measurement are refused (exit 2); what differs between the
    sides, as lines said once before the verdict."""
    lines: list[str] = []
    result = check_comparable([r.record for r in a], [r.record for r in b])
    result.raise_if_refused("--baseline / --candidate")
    same = {r.run_id for r in a} & {r.run_id for r in b}
    if same:
        lines.append("the same run is on both sides (" + ", ".join(sorted(same)) + "): "
                     "the comparison says nothing about a change")
    if result.flags:
        lines.append("baseline and candidate come from different machines or engines: " + "; ".join(result.flags))
    for side, runs in (("baseline", a), ("candidate", b)):  # e.g. keep-alive=none where no residency sets exist
        cells = {(c.model, c.setting): c.notes[0] for r in runs for c in r.record.cells if not c.applicable and c.notes}
        for (model, setting), why in cells.items():
            lines.append(f"{model} / {setting} did not apply on the {side} side ({why}): its "
                         "verdict compares what ran, not what the setting names")
    virtual = virtual_status([r.record.host.facts for r in a + b])
    if virtual["note"]:
        lines.append(str(virtual["note"]))
    return lines


def resolve_runs(refs: list[str] | None, results: str | None) -> list[Run]:
    """Runs named by id, prefix, directory, ``latest`` or ``baseline:NAME`` (``--history``'s earlier runs)."""
    root = paths.results_dir(results)
    return [baselines.resolve_run(ref, root) for ref in refs or []]
