"""The gate's baseline taken from the history archive: ``lbench gate --baseline history:<series>``.

``history_baseline(archive, "history:idle_warm_p50", machine=..., model=..., setting=...,
window=10, build=None, exclude=candidate run ids, candidate_build=N)`` picks the archived runs the
gate uses as its baseline side (docs/history.md, "The gate against history"):

- one machine, model and setting (one series: several matching is refused, naming them), complete
  runs only, the candidate's own runs left out (CI adds its runs to the archive before gating);
- one engine build, as the comparability rule asks of runs pooled on one side
  (``record.check_comparable``): ``build`` when given, else the newest build *before* the
  candidate's (the question "did this build regress?"), else (candidate build unknown) the newest;
- the newest ``window`` runs of that build, then the drift check: when Otava finds a change point
  inside the window (``harness/history/changes.py``), the window shrinks to the runs after the
  newest one (never pooled across it); fewer than 2 runs left is refused.

The archive is untrusted: every run directory the catalog names must be ``<machine id>/<run id>``
inside the archive (``harness.untrusted.inside``), and is opened through the run reader
(``open_runs``: ``harness.store.open_run``), which must agree with the catalog on the run's id,
status and machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import BadInput

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    import pandas as pd

    from harness.history.changes import ChangePoint
    from harness.store import Run

PREFIX = "history:"
WINDOW = 10  # runs, the default of --window
MIN_POINTS = 4  # harness.history.changes.MIN_POINTS (kept light here: the CLI imports this module at start)


@dataclass(frozen=True)
class HistoryBaseline:
    series: str
    archive: Path
    machine_id: str
    machine_label: str
    model: str
    setting: str
    build: int | None
    build_rule: str  # how the build was chosen, in words
    window: int  # the runs asked for
    run_ids: tuple[str, ...]  # the baseline's runs, oldest first (after the drift check)
    dirs: tuple[Path, ...]
    values: tuple[float, ...]  # the series' value of each run
    log_sd: float  # between-run sd of the series' log values (nan with fewer than 2 runs)
    drift: list[ChangePoint] = field(default_factory=list)  # change points found inside the window
    dropped: tuple[str, ...] = ()  # window runs before the newest change point: left out
    excluded: tuple[str, ...] = ()  # the candidate's own runs found in the archive: left out
    drift_checked: bool = True  # False when the window was too short for Otava (< MIN_POINTS)
    untrusted: tuple[str, ...] = ()  # runs of the series left out: no signature of a trusted runner
    seen_until: str | None = None  # the newest catalog time among the archive's runs when this baseline was chosen

    @property
    def drifting(self) -> bool:
        return bool(self.drift)

    def lines(self) -> list[str]:
        """What the verdict says about its baseline: the runs, window, build and drift check."""
        build = f"build {self.build}" if self.build is not None else "an unknown build"
        out = [f"baseline history:{self.series} from {self.archive}: {len(self.run_ids)} runs of {self.model} · "
               f"{self.setting} on {build} ({self.build_rule}) on machine {self.machine_label} ({self.machine_id}), "
               f"window {self.window}: " + ", ".join(self.run_ids)]
        if self.drifting:
            c = max(self.drift, key=lambda p: p.index)
            out.append(f"drift: a change point inside the window between runs {c.run_before} and {c.run_after} "
                       f"({c.size_text()}, p={c.pvalue:.2g}); the baseline keeps "
                       f"the {len(self.run_ids)} runs after it, {len(self.dropped)} left out")
        elif self.drift_checked:
            out.append(f"drift checked (Otava): no change point among the window's {len(self.run_ids)} runs")
        else:
            out.append(f"drift not checked: {len(self.run_ids)} runs in the window, Otava needs {MIN_POINTS}")
        if self.excluded:
            out.append("left out of the window (the candidate's own runs): " + ", ".join(self.excluded))
        if self.untrusted:
            out.append(f"left out: {len(self.untrusted)} runs not signed by a runner the archive trusts ("
                       + ", ".join(self.untrusted[:4]) + (", …" if len(self.untrusted) > 4 else "") + ")")
        return out

    def as_dict(self) -> dict:
        return {"series": self.series, "archive": str(self.archive), "machine_id": self.machine_id,
                "machine_label": self.machine_label, "model": self.model, "setting": self.setting,
                "build": self.build, "build_rule": self.build_rule, "window": self.window,
                "run_ids": list(self.run_ids), "values": list(self.values), "log_sd": self.log_sd,
                "drift": [{"run_before": c.run_before, "run_after": c.run_after, "ratio": c.ratio,
                           "ratio_ci": [c.ratio_lo, c.ratio_hi], "pvalue": c.pvalue} for c in self.drift],
                "dropped_for_drift": list(self.dropped), "excluded_candidate_runs": list(self.excluded),
                "drift_checked": self.drift_checked, "untrusted_left_out": list(self.untrusted)}


def is_history_ref(ref: str) -> bool:
    return str(ref).startswith(PREFIX)


def _builds_words(builds: Collection[int]) -> str:
    return ", ".join(str(b) for b in builds) if builds else "none"


def _choose_build(rows: pd.DataFrame, spec_name: str, archive: Path, build: int | None,
                  candidate_build: int | None) -> tuple[int | None, str]:
    builds = sorted({int(b) for b in rows["build"].dropna()})
    if build is not None:
        if build not in builds:
            raise BadInput(f"the archive has no {spec_name} run on build {build} for this series", where="--build",
                           hint=f"builds it holds for this series: {_builds_words(builds)}")
        return build, "given by --build"
    if candidate_build is not None:
        older = [b for b in builds if b < candidate_build]
        if not older:
            same = (f"; --build {candidate_build} gates against the earlier runs of the candidate's own build"
                    if candidate_build in builds else "")
            raise BadInput(f"the archive has no {spec_name} run on a build before the candidate's build "
                           f"{candidate_build}", where=str(archive),
                           hint=f"name the baseline build with --build (builds held: {_builds_words(builds)}){same}")
        return older[-1], f"the newest build before the candidate's {candidate_build}"
    if builds:
        return builds[-1], "the newest build (the candidate's build is unknown)"
    return None, "runs of an unknown build (the candidate's build is unknown)"


def history_baseline(archive: Path, ref: str, *, machine: str | None = None, model: str | None = None,
                     setting: str | None = None, window: int = WINDOW, build: int | None = None,
                     exclude: tuple[str, ...] | list[str] = (), candidate_build: int | None = None,
                     since: str | None = None) -> HistoryBaseline:
    """The baseline window (module docstring).  Only runs signed by a runner the archive trusts
    count.  ``since``: when this series was last gated, as the catalog's clock (``GateState``);
    a window made only of runs cataloged after it (runs no earlier gate had) does not replace the
    runs it had: refused unless the build was named with ``build``."""
    import numpy as np

    from harness.history.archive import MACHINE_ID, RUN_ID
    from harness.history.changes import detect
    from harness.history.query import connect
    from harness.history.series import SERIES
    from harness.untrusted import inside

    if not is_history_ref(ref):
        raise BadInput(f"not a history baseline: {ref!r}", where="--baseline",
                       hint="history:<series>, e.g. history:idle_warm_p50")
    name = ref[len(PREFIX):]
    spec = SERIES.get(name)
    if spec is None:
        raise BadInput(f"no history series {name!r}", where="--baseline",
                       hint=f"series: {', '.join(SERIES)} (docs/history.md)")
    if spec.statuses != ("complete",):
        gateable = ", ".join(n for n, s in SERIES.items() if s.statuses == ("complete",))
        raise BadInput(f"history:{name} counts failed runs too; the gate pools complete runs' samples",
                       where="--baseline", hint=f"gate on a series of complete runs: {gateable}; the failures "
                       "themselves are for lbench trend to follow (docs/history.md)")
    if window < 2:
        raise BadInput(f"the history window is {window} run(s); a between-run spread needs 2 or more",
                       where="--window", hint=f"give --window 2 or more (default {WINDOW})")
    archive = Path(archive)
    con = connect(archive)
    try:
        rows = spec.rows(con, machine=machine, model=model, setting=setting)
        dirs = dict(con.execute("SELECT run_id, dir FROM runs").fetchall())
        trust = {r: (bool(t), c) for r, t, c in con.execute("SELECT run_id, trusted, cataloged_at FROM runs").fetchall()}
        machines = con.execute("SELECT DISTINCT machine_id, machine_label FROM runs ORDER BY machine_id").fetchall()
        anywhere = spec.rows(con, machine=machine) if rows.empty else None
    finally:
        con.close()
    rows = rows[rows["value"].notna()]
    untrusted = tuple(sorted(r for r in rows["run_id"] if not trust.get(r, (False, None))[0]))
    rows = rows[~rows["run_id"].isin(list(untrusted))]  # unsigned, or signed by a key the archive does not trust
    excluded = tuple(sorted(set(rows["run_id"]) & set(exclude)))
    rows = rows[~rows["run_id"].isin(list(exclude))]
    if rows.empty and untrusted:
        raise BadInput(f"the archive's {len(untrusted)} {spec.name} runs for this series are not signed by a runner "
                       "it trusts (" + ", ".join(untrusted[:4]) + ")", where=str(archive),
                       hint="trust the runner that made them (lbench history trust add KEY), if it is yours; runs "
                            "archived before lbench signed runs: sign them where they are (lbench history sign "
                            "DIR...) with a trusted key and delete the archive's .catalog folder (docs/history.md)")
    if rows.empty:
        listed = "; ".join(f"{m} ({label})" for m, label in machines[:6]) or "none"
        if machine and not any(machine == m or machine in str(label) for m, label in machines):
            raise BadInput(f"the archive holds no run of machine {machine}", where=str(archive),
                           hint=f"machines it holds: {listed}; gate against one with --machine ID "
                                "(the difference is flagged), or add this machine's runs: lbench history add")
        held = "" if anywhere is None or anywhere.empty else " (it has: " + "; ".join(
            f"{mo} · {s}" for mo, s in sorted(set(zip(anywhere["model"], anywhere["setting"])))[:6]) + ")"
        raise BadInput(f"the archive has no complete {spec.name} run for machine {machine or 'any'}, model "
                       f"{model or 'any'}, setting {setting or 'any'}" + (" besides the candidate's own" if excluded
                                                                         else "") + held,
                       where=str(archive), hint=f"lbench history query - --series {spec.name} lists what it has; "
                                                "choose with --machine, --model, --setting")
    groups = rows.groupby(["machine_id", "model", "setting"]).size()
    if len(groups) > 1:
        listed = "; ".join(f"machine {m}, model {mo}, setting {s}" for m, mo, s in groups.index[:4])
        raise BadInput(f"history:{spec.name} matches {len(groups)} series; a baseline is one", where=str(archive),
                       hint=f"name the machine, model and setting (--machine, --model, --setting): {listed}")
    chosen, rule = _choose_build(rows, spec.name, archive, build, candidate_build)
    pick = rows[rows["build"] == chosen] if chosen is not None else rows[rows["build"].isna()]
    pick = pick.sort_values(["started_at", "run_id"]).tail(window).reset_index(drop=True)
    drift = detect(pick)  # ordered by build, then start time: one build here, so the window's order
    dropped: tuple[str, ...] = ()
    if drift:
        cut = max(c.index for c in drift)
        dropped, pick = tuple(pick["run_id"].iloc[:cut]), pick.iloc[cut:].reset_index(drop=True)
    if since is not None and build is None:
        _no_takeover(pick, dropped, trust, since, chosen, spec.name)
    if len(pick) < 2:
        after = " after the newest change point inside the window" if drift else ""
        raise BadInput(f"only {len(pick)} {spec.name} run of build {chosen} is left{after}; a history baseline "
                       "needs 2 or more for its between-run spread", where=str(archive),
                       hint="add more runs of that build (lbench history add), or name another with --build")
    paths = []
    for run_id in pick["run_id"]:
        rel = str(dirs.get(run_id, ""))
        parts = rel.split("/")
        path = archive / rel
        if len(parts) != 2 or not MACHINE_ID.match(parts[0]) or not RUN_ID.match(parts[1]) \
                or parts[1] != run_id or not inside(archive, path):
            raise BadInput(f"the archive's catalog names run {run_id}'s directory as {rel!r}, not "
                           "<machine id>/<run id> inside the archive", where=str(archive / ".catalog"),
                           hint="delete the archive's .catalog folder (it is rebuilt from the run directories)")
        paths.append(path)
    values = pick["value"].to_numpy(dtype=float)
    logs = np.log(values[values > 0])
    first = pick.iloc[0]
    return HistoryBaseline(
        series=spec.name, archive=archive, machine_id=str(first["machine_id"]),
        machine_label=str(first["machine_label"]), model=str(first["model"]), setting=str(first["setting"]),
        build=chosen, build_rule=rule, window=window, run_ids=tuple(pick["run_id"]), dirs=tuple(paths),
        values=tuple(float(v) for v in values),
        log_sd=float(np.std(logs, ddof=1)) if logs.size > 1 else math.nan, drift=drift, dropped=dropped,
        excluded=excluded, drift_checked=len(pick) + len(dropped) >= MIN_POINTS, untrusted=untrusted,
        seen_until=max((c for r, (_, c) in trust.items() if c), default=None))


def _no_takeover(pick: pd.DataFrame, dropped: tuple[str, ...], trust: Mapping[str, tuple[bool, str | None]],
                 since: str, build: int | None, series: str) -> None:
    """A window made only of runs cataloged after the last gate of this series never replaces the
    runs that gate had: neither a new build that only new runs claim, nor a drift check that would
    drop the established runs in favour of new ones."""
    new = [r for r in pick["run_id"] if (trust.get(r, (False, None))[1] or "") > since]
    if pick.empty or len(new) < len(pick):
        return
    why = (f"the drift check would drop {len(dropped)} runs the last gate had ({', '.join(dropped[:4])}) and keep"
           if dropped else f"build {build} is held only by")
    raise BadInput(f"{why} runs added since the last gate against history:{series} ({since}): "
                   + ", ".join(new[:6]) + "; a baseline made only of newly added runs does not replace the runs "
                   "it had", where="--baseline",
                   hint="check who added those runs (lbench history query \"SELECT run_id, signer, cataloged_at FROM "
                        "runs\"); if they are genuine, name the build with --build to take them (docs/history.md)")


def open_runs(baseline: HistoryBaseline) -> list[Run]:
    """The baseline's runs, read through the run reader; each must be the run the catalog says."""
    from harness.store import open_run

    runs = []
    for run_id, path in zip(baseline.run_ids, baseline.dirs):
        run = open_run(path, baseline.archive)
        rec = run.record
        if rec.run_id != run_id or rec.status != "complete" or rec.machine.id != baseline.machine_id:
            raise BadInput(f"the archived run {path.name} is not what the catalog says (id {rec.run_id}, status "
                           f"{rec.status}, machine {rec.machine.id})", where=str(path),
                           hint="delete the archive's .catalog folder so it is rebuilt, or remove the damaged run")
        runs.append(run)
    return runs
