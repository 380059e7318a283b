"""The trend site's plot cache: a plot is drawn again only when what it shows changed."""

from __future__ import annotations

import pandas as pd

from harness.history.plot_cache import PlotCache, plot_key

PNG = b"\x89PNG\r\n\x1a\n fake"


def _points(values):
    return pd.DataFrame({"build": [1, 2, 3], "started_at": ["a", "b", "c"], "run_id": ["r1", "r2", "r3"],
                         "value": values, "lo": [0.5] * 3, "hi": [9.0] * 3})


def test_the_key_changes_with_what_the_plot_shows():
    base = plot_key(_points([1.0, 2.0, 3.0]), [], "t", "ms")
    assert base == plot_key(_points([1.0, 2.0, 3.0]), [], "t", "ms")
    assert base != plot_key(_points([1.0, 2.0, 3.5]), [], "t", "ms")
    assert base != plot_key(_points([1.0, 2.0, 3.0]), [], "other title", "ms")
    assert base != plot_key(_points([1.0, 2.0, 3.0]), [], "t", "s")


def test_a_cached_plot_is_not_drawn_again_and_unused_ones_are_pruned(tmp_path):
    drawn = []

    def draw(tag):
        drawn.append(tag)
        return PNG + tag.encode()

    first = PlotCache(tmp_path / "plots")
    assert first.get("a", lambda: draw("a")) == PNG + b"a"
    assert first.get("b", lambda: draw("b")) == PNG + b"b"
    first.prune()
    second = PlotCache(tmp_path / "plots")
    assert second.get("a", lambda: draw("a2")) == PNG + b"a"  # from the cache
    assert drawn == ["a", "b"] and (second.hits, second.drawn) == (1, 0)
    second.prune()  # "b" was not used by this build
    assert sorted(p.stem for p in (tmp_path / "plots").glob("*.png")) == ["a"]


def test_a_damaged_cache_file_is_drawn_again(tmp_path):
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "k.png").write_bytes(b"not a png")
    cache = PlotCache(tmp_path / "plots")
    assert cache.get("k", lambda: PNG) == PNG and cache.drawn == 1
    assert (tmp_path / "plots" / "k.png").read_bytes() == PNG


def test_an_unwritable_cache_still_draws(tmp_path):
    blocker = tmp_path / "plots"
    blocker.write_text("a file where the folder would be")
    cache = PlotCache(blocker)
    assert cache.get("k", lambda: PNG) == PNG
    assert PlotCache(None).get("k", lambda: PNG) == PNG
