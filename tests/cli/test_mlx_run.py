"""mlx_lm.server for real on a generated MLX model (skipped when mlx is not installed)."""

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli

pytest.importorskip("mlx.core")
mlx = pytest.importorskip("mlx_lm")


def test_generated_mlx_model_dir(lbench_env):
    from harness.models.mlx_synth import MARKER, mlx_info, synthesize_mlx
    from harness.models.presets import get_shape

    path = synthesize_mlx(get_shape("tiny"))
    assert {p.name for p in path.iterdir()} >= {"config.json", "model.safetensors", "tokenizer.json",
                                                "tokenizer_config.json", MARKER}
    info = mlx_info(path)
    assert info["synthetic"] and info["arch"] == "llama" and info["n_layer"] == 2


def test_idle_and_swap_through_mlx(lbench_env):
    r = run_cli("idle", "--engine", "mlx", "-m", "tiny-f16", "--pauses", "0,0.2", "--reps", "3",
                env=lbench_env, timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    runs = sorted(Path(lbench_env["LBENCH_RESULTS_DIR"]).iterdir())
    s = pd.read_parquet(runs[0] / "samples.parquet")
    m = s[s["phase"] == "measure"]
    assert len(m) == 6 and m["http_status"].eq(200).all() and m["server_prompt_ms"].isna().all()
    manifest = json.loads((runs[0] / "manifest.json").read_text())
    assert manifest["engine"]["engine"] == "mlx" and "client-side" in manifest["engine"]["timing"]
    r = run_cli("swap", "--engine", "mlx", "-m", "tiny-f16", "-m", "tiny-f16", "-n", "6", "--no-report",
                env=lbench_env, timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    assert "mlx_lm.server keeps one model: 6 loads over 6 requests" in r.stdout
