"""scripts/real_vs_synthetic.py runs the real llama-server and prints one line per model (its
numbers are a benchmark, not checked); bad arguments exit 2."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = str(REPO / "scripts" / "real_vs_synthetic.py")


@pytest.mark.engine
def test_prints_a_line_per_model_and_keeps_the_raw_samples(engine_env, tmp_path):
    out = tmp_path / "raw.json"
    proc = subprocess.run([sys.executable, SCRIPT, "-m", "tiny-q8", "--reps", "2", "--n-predict", "3", "--out",
                           str(out)], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("tiny-q8: synthetic Q8_0") and "tokens/s (n=2 of 2)" in proc.stdout
    samples = json.loads(out.read_text())["results"][0]["samples"]
    assert [s["http_status"] for s in samples] == [200, 200] and all(s["predicted_n"] == 3 for s in samples)


def test_bad_reps_is_exit_2():
    proc = subprocess.run([sys.executable, SCRIPT, "-m", "tiny-q8", "--reps", "0"], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert proc.returncode == 2 and "--reps and --n-predict must be >= 1" in proc.stderr
