import json

import pytest

from harness.atomic import atomic_write_json, atomic_write_text


def test_replaces_whole_and_leaves_no_temp(tmp_path):
    target = tmp_path / "m.json"
    target.write_text("old")
    atomic_write_json(target, {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]


def test_failed_write_keeps_old_content(tmp_path, monkeypatch):
    target = tmp_path / "r.html"
    target.write_text("old")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr("harness.atomic.os.replace", broken_replace)
    with pytest.raises(OSError):
        atomic_write_text(target, "new")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["r.html"]
