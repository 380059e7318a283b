"""``lbench gate --baseline history:<series>``: both sides of a gate against the history archive.

The candidate runs are resolved as usual; the filters default from them (machine = the
candidate's machine fingerprint, model and setting = the candidate's when it has one, baseline
build = the newest before the candidate's); the baseline is the archive's window of runs
(``harness/history/gate_hook.py``), opened through the run reader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.errors import BadInput

if TYPE_CHECKING:
    from collections.abc import Iterable

    from harness.analysis.verdicts import Verdict
    from harness.history.gate_hook import HistoryBaseline
    from harness.store import Run


def history_sides(baseline: list[str], candidate: list[str] | None, results: str | None, *,
                  history: list[str] | None, archive: str | None, window: int | None, build: int | None,
                  machine: str | None, model: str | None, setting: str | None
                  ) -> tuple[list[Run], list[Run], HistoryBaseline]:
    from harness import baselines, paths
    from harness.history.archive import archive_dir
    from harness.history.catalog import run_settings
    from harness.history.gate_hook import WINDOW, history_baseline, open_runs
    from harness.history.gate_state import last_gate, record_gate, state_key
    from harness.history.series import SERIES

    if len(baseline) != 1:
        raise BadInput(f"a history baseline stands alone; {len(baseline)} --baseline values were given",
                       where="--baseline", hint="give one --baseline history:<series> (its runs are the baseline)")
    if history:
        raise BadInput("--history with a history baseline would count the archive's runs twice", where="--history",
                       hint="leave --history out: the window's runs are the between-run spread (widen --window)")
    if not candidate:
        raise BadInput("no candidate run given", where="--candidate", hint="give run ids, directories or 'latest'")
    ref = baseline[0]
    name = ref.split(":", 1)[1]
    spec = SERIES.get(name)
    if spec is None:
        raise BadInput(f"no history series {name!r}", where="--baseline",
                       hint=f"series: {', '.join(SERIES)} (docs/history.md)")
    root = paths.results_dir(results)
    rb = [baselines.resolve_run(r, root, kinds={spec.kind}) for r in candidate]
    wrong = [r.run_id for r in rb if r.record.kind != spec.kind]
    if wrong:
        kind = next(r.record.kind for r in rb if r.run_id == wrong[0])
        raise BadInput(f"history:{spec.name} is a series of {spec.kind} runs; candidate {wrong[0]} is a {kind} run",
                       where="--candidate", hint="choose a series of the candidate's kind: " + (", ".join(
                           n for n, s in SERIES.items() if s.kind == kind) or "none has one"))
    first = rb[0].record
    labels = first.model_labels
    settings = run_settings(first)
    model_defaulted = model is None
    where = archive_dir(archive, results)
    machine = machine or first.machine.id
    model = model or (labels[0] if len(labels) == 1 else None)
    setting = setting or (settings[0] if len(settings) == 1 else None)
    key = state_key(spec.name, machine, model, setting)
    hb = history_baseline(where, ref, machine=machine, model=model, setting=setting,
                          window=window if window is not None else WINDOW, build=build,
                          exclude=[r.run_id for r in rb], candidate_build=first.engine.build_number,
                          since=last_gate(where, key))
    ra = open_runs(hb)
    if build is None:  # a build named by a person is taken as asked, and moves no mark
        record_gate(where, key, hb.seen_until)
    if model_defaulted and set(ra[0].record.model_labels) != set(labels):
        raise BadInput(f"the history runs are of {', '.join(ra[0].record.model_labels)}, the candidate of "
                       f"{', '.join(labels)}", where=str(where), hint="name the model with --model")
    return ra, rb, hb


def pooled_lines(results: Iterable[Verdict]) -> list[str]:
    """The pooled between-run spread behind each gating group's interval."""
    out = []
    for v in results:
        if getattr(v, "primary", False) and v.verdict != "refused" and v.sd_run == v.sd_run:
            out.append(f"pooled between-run sd of {v.model} · {v.setting} · {v.regime}: {v.sd_run:.3g} "
                       f"(log scale, df {v.df:g}: {v.n_runs_a} history runs + {v.n_runs_b} candidate runs)")
    return out
