"""Real runs for the history tests: one short idle sweep and one swap storm on tiny generated
models, made once per test session with the real llama-server, and copies of them made into a
series across builds (``clone_run``: new id, engine build and start time written into the
manifest, latencies scaled where a test wants a known step; the copies are test input, never a
reported figure).  The test session is the runner: its key (``$LBENCH_RUNNER_KEY``, set by
tests/conftest.py) signs the real runs as lbench makes them and each copy once made; ``trusted``
puts that key on an archive's allow-list, as a fleet does with its runners' keys."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli, trusted  # tests/conftest.py

from harness.attest import sign_run

__all__ = ["clone_run", "real_runs", "trusted"]


@pytest.fixture(scope="session")
def real_runs(tmp_path_factory, engine_binary) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("history-runs")
    results = base / "results"
    env = {"LBENCH_CACHE_DIR": str(base / "cache"), "LBENCH_CATALOG": str(base / "catalog.toml"),
           "LBENCH_RESULTS_DIR": str(results), "LBENCH_LLAMA_SERVER": str(engine_binary)}
    commands = {
        "idle": ["idle", "-m", "tiny-q8", "--pauses", "0,0.3", "--reps", "6", "--warmup", "1", "--no-report"],
        "swap": ["swap", "-m", "tiny-q8", "-m", "tiny-q4", "--models-max", "1", "--pattern", "round-robin",
                 "-n", "6", "--no-report"],
    }
    runs = {}
    for name, args in commands.items():
        before = {p.name for p in results.iterdir()} if results.is_dir() else set()
        r = run_cli(*args, env=env)
        assert r.returncode == 0, f"lbench {' '.join(args)}\n{r.stderr}{r.stdout}"
        (new,) = [p for p in results.iterdir() if p.is_dir() and p.name not in before]
        runs[name] = new
    return runs


def clone_run(src: Path, dest_root: Path, n: int, *, build: int, scale: float = 1.0,
              when: datetime | None = None, sign: bool = True) -> Path:
    """A copy of a real run under a new id, as run on ``build``, its latencies times ``scale``."""
    manifest = json.loads((src / "manifest.json").read_text())
    when = when or datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(minutes=n)
    run_id = f"{when:%Y%m%dT%H%M%SZ}-{manifest['kind']}-{n:04x}"
    dest = dest_root / run_id
    shutil.copytree(src, dest, symlinks=True)
    (dest / "analysis.json").unlink(missing_ok=True)  # recomputed from the changed tables
    manifest.update(run_id=run_id, started_at=when.isoformat(timespec="milliseconds"))
    manifest["engine"]["build_number"] = build
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1))
    for table in ("samples", "requests"):
        path = dest / f"{table}.parquet"
        if path.exists():
            frame = pd.read_parquet(path)
            frame["run_id"] = run_id
            if "latency_ms" in frame:
                frame["latency_ms"] = frame["latency_ms"] * scale
            frame.to_parquet(path, index=False)
        (dest / f"{table}.jsonl").unlink(missing_ok=True)
    (dest / "signature.json").unlink(missing_ok=True)
    if sign:
        sign_run(dest)  # the runner vouches for its copy (the forged-run tests leave theirs unsigned)
    return dest
