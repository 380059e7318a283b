"""The trend site's bounds, on constructed series: the build window and the change points it
keeps, the reused figure, the command that lists every run (no engine needed)."""

from __future__ import annotations

import shlex

import numpy as np
import pandas as pd
import pytest

from harness.history.changes import detect
from harness.history.trend import (CONTEXT, build_window, in_window, list_command, plot_series, windowed,
                                   x_positions)


def series(values, builds, name="idle_warm_p50"):
    n = len(values)
    return pd.DataFrame({
        "series": name, "run_id": [f"20260101T{i // 60:02d}{i % 60:02d}00Z-idle-{i:04x}" for i in range(n)],
        "machine_id": "0fb196c11cb7", "machine_label": "test machine", "build": pd.array(builds, dtype="Int64"),
        "started_at": [f"2026-01-01T{i // 60:02d}:{i % 60:02d}:00+00:00" for i in range(n)], "model": "tiny-q8",
        "setting": "keep-alive=default", "value": np.asarray(values, dtype=float), "lo": np.nan, "hi": np.nan,
        "n": 12})


def stepped(n_builds=10, per_build=4, step_at=6, step=1.6, seed=3):
    rng = np.random.default_rng(seed)
    builds = [11000 + b for b in range(n_builds) for _ in range(per_build)]
    values = [10 * (step if b >= 11000 + step_at else 1) * float(np.exp(rng.normal(0, 0.05))) for b in builds]
    return series(values, builds)


def test_the_window_is_the_newest_builds():
    assert build_window([1, 5, 3, 3, None, 9], 2) == 5
    assert build_window([1, 5, 3], 10) == 1  # fewer builds than the window: all of them
    assert build_window([None], 2) is None and build_window([1, 2], None) is None


def test_detection_sees_context_runs_before_the_window():
    g = stepped(n_builds=30, per_build=4, step_at=27)  # 120 runs; the window: the newest 4 builds
    first = build_window(g["build"], 4)
    assert first == 11026
    seen, context = windowed(g, first, 4)
    assert context == CONTEXT and len(seen) == CONTEXT + 16
    assert (seen.iloc[context:]["build"] >= first).all() and (seen.iloc[:context]["build"] < first).all()
    everything, none = windowed(g, None, None)
    assert everything is g and none == 0


def test_a_step_at_the_windows_oldest_build_is_still_found():
    g = stepped(n_builds=10, per_build=4, step_at=6)  # the step into build 11006
    first = build_window(g["build"], 4)  # 11006 ... 11009
    seen, context = windowed(g, first, 4)
    (change,) = in_window(detect(seen), seen, context)
    assert (change.build_before, change.build_after) == (11005, 11006)
    assert change.index == 0  # the first point of the window: the plot draws it left of that point
    assert change.n_before == 24 and change.n_after == 16  # judged on the runs before the window too


def test_a_step_before_the_window_is_not_reported():
    g = stepped(n_builds=10, per_build=4, step_at=3)
    first = build_window(g["build"], 4)
    seen, context = windowed(g, first, 4)
    assert detect(seen) and in_window(detect(seen), seen, context) == []


def test_change_indices_count_every_point_shown():
    # detect() leaves out values <= 0 (a wake penalty can be negative): the plot's index counts them
    g = stepped(n_builds=8, per_build=4, step_at=4)
    g.loc[1, "value"] = -3.0
    (change,) = in_window(detect(g), g, 0)
    assert change.index == 16 and g.iloc[change.index]["build"] == 11004


def test_unknown_builds_are_left_out_of_a_window():
    g = series([1.0, 2.0, 3.0, 4.0], [None, None, 7, 8])
    g = g.sort_values(["build", "started_at", "run_id"], na_position="first")
    seen, context = windowed(g, build_window(g["build"], 1), 1)
    assert context == 1 and list(seen["build"]) == [7, 8]


def test_runs_of_one_build_sit_side_by_side():
    xs, names = x_positions(pd.Series([1, 1, 2, 3, 3, 3], dtype="Int64"))
    assert names == ["1", "2", "3"]
    assert xs[2] == 1.0 and xs[0] < 0 < xs[1] and xs[3] < 2 == xs[4] < xs[5]


def test_the_reused_figure_draws_each_plot_as_a_fresh_one_would():
    a = stepped(n_builds=6, per_build=2)
    b = series(np.exp(np.linspace(0, 6, 12)), [11000 + i // 2 for i in range(12)])  # spans decades: log scale
    b["lo"], b["hi"] = b["value"] * 0.5, b["value"] * 2
    first = plot_series(a, [], "a", "ms")
    plot_series(b, detect(b), "b", "ms", " of the newest 6 builds")
    assert plot_series(a, [], "a", "ms") == first  # nothing of b left behind (scale, lines, legend, limits)
    assert first.startswith(b"\x89PNG")


def test_the_list_command_is_quoted():
    cmd = list_command("/srv/my history", "idle_warm_p50", "0fb196c11cb7", "tiny q8", "keep-alive=default")
    assert shlex.split(cmd) == ["lbench", "history", "query", "-", "--series", "idle_warm_p50", "--machine",
                                "0fb196c11cb7", "-m", "tiny q8", "--setting", "keep-alive=default",
                                "--archive", "/srv/my history"]


@pytest.mark.parametrize("bad", [{"points": -1}, {"builds": 0}])
def test_bad_bounds_are_refused(tmp_path, bad):
    from harness.history.trend import build_site

    with pytest.raises(ValueError):
        build_site(tmp_path, **bad)


def test_the_pool_finds_and_draws_what_this_process_does():
    from harness.history.plot_cache import PlotCache
    from harness.history.trend import ORDER, _Workers

    g = stepped(n_builds=10, per_build=4, step_at=6)
    seen, context = windowed(g, build_window(g["build"], 4), 4)
    here = _Workers(PlotCache(None), 1)
    found = here.changes(seen, context).result()
    assert len(found) == 1
    args = (seen.iloc[context:][ORDER + ["value", "lo", "hi"]], found, "a", "ms", "")
    png = here.plot("k", args).result()
    pool = _Workers(PlotCache(None), 2)
    try:
        pool.start()
        futures = [pool.changes(seen, context) for _ in range(2)] + [pool.plot(f"k{i}", args) for i in range(3)]
        assert pool.pool is not None  # done by other processes
        assert [f.result() for f in futures] == [found, found, png, png, png]
        assert pool.cache.drawn == 3
    finally:
        pool.close()
