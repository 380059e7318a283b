"""A gate baseline taken from the history archive: ``history:<series>`` (a hook for the gate).

``history_baseline(archive, "history:idle_warm_p50", machine=..., model=..., setting=...)`` picks
the archived runs a gate would pool as its baseline: the newest ``window`` complete runs of one
machine, model and setting on one engine build (the newest build unless ``build`` is given), as
the comparability rule asks of runs pooled on one side (``record.check_comparable``).  It also
returns what the history knows beyond one comparison: the between-run spread of the series'
values (log sd, the variance a gate's statistics can use instead of assuming one), and whether
the window drifts (an Otava change point inside it, ``harness/history/changes.py``).

It does not touch the gate: ``lbench gate --baseline history:<series>`` is for the gate's owner to
wire (open each of ``dirs`` with ``harness.store.open_run`` and pass them as the baseline side).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.errors import BadInput
from harness.history.changes import ChangePoint, detect

PREFIX = "history:"


@dataclass(frozen=True)
class HistoryBaseline:
    series: str
    machine_id: str
    model: str
    setting: str
    build: int | None
    run_ids: tuple[str, ...]
    dirs: tuple[Path, ...]  # the archived run directories, oldest first
    values: tuple[float, ...]
    log_sd: float  # between-run spread of the series' values (nan with fewer than 2 runs)
    drift: list[ChangePoint] = field(default_factory=list)  # change points inside the window

    @property
    def drifting(self) -> bool:
        return bool(self.drift)


def is_history_ref(ref: str) -> bool:
    return str(ref).startswith(PREFIX)


def history_baseline(archive: Path, ref: str, *, machine: str | None = None, model: str | None = None,
                     setting: str | None = None, window: int = 10, build: int | None = None) -> HistoryBaseline:
    from harness.history.query import connect
    from harness.history.series import get_series

    if not is_history_ref(ref):
        raise BadInput(f"not a history baseline: {ref!r}", where="--baseline",
                       hint="history:<series>, e.g. history:idle_warm_p50")
    spec = get_series(ref[len(PREFIX):])
    if window < 1:
        raise BadInput(f"the history window is {window} runs", where="--window", hint="give 1 or more runs")
    con = connect(Path(archive))
    try:
        rows = spec.rows(con, machine=machine, model=model, setting=setting)
        dirs = dict(con.execute("SELECT run_id, dir FROM runs").fetchall())
    finally:
        con.close()
    rows = rows[rows["value"].notna()]
    groups = rows.groupby(["machine_id", "model", "setting"]).size()
    if rows.empty:
        raise BadInput(f"the archive has no {spec.name} runs for these filters", where=str(archive),
                       hint="lbench history query - --series " + spec.name + " lists what it has")
    if len(groups) > 1:
        listed = "; ".join(f"machine {m}, model {mo}, setting {s}" for m, mo, s in groups.index[:4])
        raise BadInput(f"history:{spec.name} matches {len(groups)} series; a baseline is one", where=str(archive),
                       hint=f"name the machine, model and setting: {listed}")
    chosen = build if build is not None else int(rows["build"].dropna().max()) if rows["build"].notna().any() else None
    pick = rows[rows["build"] == chosen] if chosen is not None else rows
    pick = pick.sort_values(["started_at", "run_id"]).tail(window)
    if pick.empty:
        raise BadInput(f"no {spec.name} run on build {chosen} in the archive", where=str(archive),
                       hint="give a build the archive holds (lbench history list)")
    values = pick["value"].to_numpy(dtype=float)
    logs = np.log(values[values > 0])
    first = pick.iloc[0]
    return HistoryBaseline(
        series=spec.name, machine_id=str(first["machine_id"]), model=str(first["model"]),
        setting=str(first["setting"]), build=chosen, run_ids=tuple(pick["run_id"]),
        dirs=tuple(Path(archive) / dirs[r] for r in pick["run_id"]), values=tuple(float(v) for v in values),
        log_sd=float(np.std(logs, ddof=1)) if logs.size > 1 else math.nan, drift=detect(pick))
