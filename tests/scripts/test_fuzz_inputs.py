"""scripts/fuzz_inputs.py tries cases per class and prints a row for each (its counts are a
benchmark, not checked, except that nothing crashed)."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLASSES = ["idle-spec", "swap-spec", "claim", "bytes", "server-args", "shell", "archive", "query"]


def test_fuzz_prints_a_row_per_class_and_nothing_crashes():
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "fuzz_inputs.py"), "-n", "20", "--seed", "3"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()[1:]]
    assert [r[0] for r in rows] == CLASSES
    for name, tried, accepted, refused, crashed, _ms in rows:
        assert int(tried) == 20 and int(accepted) + int(refused) == 20 and crashed == "0", name


def test_fuzz_rejects_bad_options():
    for args in (["-n", "0"], ["--only", "nope"]):
        proc = subprocess.run([sys.executable, str(REPO / "scripts" / "fuzz_inputs.py"), *args],
                              capture_output=True, text=True, cwd=REPO, timeout=300)
        assert proc.returncode == 2 and proc.stderr
