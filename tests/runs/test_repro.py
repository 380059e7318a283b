"""A repro run records the device selection --device set (lbench bisect CLAIM --backend B --device N)."""

import json

import pytest

from harness.engines.binary import locate
from harness.runs.repro import execute_repro


@pytest.mark.engine
def test_repro_manifest_records_the_device_selection(engine_binary, lbench_env, monkeypatch, tmp_path):
    monkeypatch.setenv("GGML_VK_VISIBLE_DEVICES", "0")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    run = execute_repro([], locate(str(engine_binary)), results=str(tmp_path / "results"))
    engine = json.loads((run.dir / "manifest.json").read_text())["engine"]
    assert engine["backend"] == "cpu" and engine["device_select"] == {"GGML_VK_VISIBLE_DEVICES": "0"}
    monkeypatch.delenv("GGML_VK_VISIBLE_DEVICES")
    run = execute_repro([], locate(str(engine_binary)), results=str(tmp_path / "results"))
    assert json.loads((run.dir / "manifest.json").read_text())["engine"]["device_select"] == {}
