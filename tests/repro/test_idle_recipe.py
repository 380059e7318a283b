"""The idle-equivalence recipe's arithmetic (harness/repro/idle_recipe.py), run by the system's awk
against scipy and against lbench's own verdicts (harness.analysis.verdicts) on constructed samples;
tests/repro/test_recipe_engine.py runs a whole recipe against llama-server."""

from __future__ import annotations

import shutil
import subprocess
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from harness.analysis.verdicts import VerdictConfig, decide_groups
from harness.engines.binary import Binary
from harness.repro.claims import Requirement
from harness.repro.idle_recipe import DECIDE_AWK, T_AWK, write_equivalence_recipe
from harness.repro.idle_scenarios import equivalence_figures, equivalence_groups

AWK = shutil.which("awk")
BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(AWK is None or BASH is None, reason="needs awk and bash")


def test_awk_t_distribution_matches_scipy():
    cases = [(df, t) for df in (1.0, 1.37, 2.0, 3.5, 10.0, 30.0) for t in (-2.5, 0.0, 0.3, 1.9, 4.0, 12.0)]
    prog = T_AWK + "BEGIN {" + "".join(f"printf \"%.12f %.12f\\n\", tsf({t}, {df}), tq(0.975, {df});"
                                       for df, t in cases) + "}"
    out = subprocess.run([AWK, prog], capture_output=True, text=True, check=True).stdout.split("\n")
    for (df, t), line in zip(cases, out):
        sf, q = (float(x) for x in line.split())
        assert sf == pytest.approx(float(stats.t.sf(t, df)), abs=1e-9), (df, t)
        assert q == pytest.approx(float(stats.t.ppf(0.975, df)), abs=1e-6), df


def _samples(rng, ratios: dict[float, float], starts: int, reps: int, spread: float) -> pd.DataFrame:
    rows = []
    for model, base in (("m-a", 4.0), ("m-b", 9.0)):
        for start in range(1, starts + 1):
            level = base * np.exp(rng.normal(0, spread))
            for pause in (0.0, 0.05, *ratios):
                for _ in range(reps):
                    rows.append({"model": model, "start": start, "phase": "measure", "error": None,
                                 "pause_requested_s": pause,
                                 "latency_ms": level * ratios.get(pause, 1.0) * np.exp(rng.normal(0, 0.02))})
    return pd.DataFrame(rows)


def _awk_counts(tmp_path, frame: pd.DataFrame, long: list[float], starts: int, margin: float) -> list[int]:
    index = {"m-a": 1, "m-b": 2}
    (tmp_path / "times.txt").write_text("".join(f"{index[r.model]} {r.start} {r.pause_requested_s:g} "
                                                f"{r.latency_ms / 1000!r}\n" for r in frame.itertuples()))
    done = subprocess.run([AWK, "-v", "short=0 0.05", "-v", "long=" + " ".join(f"{p:g}" for p in long),
                           "-v", "nmodels=2", "-v", f"starts={starts}", "-v", f"margin={margin!r}", "-v", "alpha=0.05",
                           "-v", "minn=5", DECIDE_AWK, str(tmp_path / "times.txt")], capture_output=True, text=True,
                          env={"NAMES": "m-a\nm-b", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return [int(x) for x in done.stdout.split()]


@pytest.mark.parametrize("case", ["equal", "slower", "noisy", "one-slower-two-starts"])
def test_awk_decides_the_groups_as_lbench_does(tmp_path, case):
    rng = np.random.default_rng({"equal": 1, "slower": 2, "noisy": 3, "one-slower-two-starts": 4}[case])
    starts = {"equal": 4, "slower": 4, "noisy": 3, "one-slower-two-starts": 2}[case]
    ratios = {"equal": {1.4: 1.0, 3.0: 1.01}, "slower": {1.4: 1.0, 3.0: 1.6},
              "noisy": {1.4: 1.0, 3.0: 1.0}, "one-slower-two-starts": {1.4: 1.3, 3.0: 1.0}}[case]
    spread = 0.4 if case == "noisy" else 0.01
    frame = _samples(rng, ratios, starts, 5, spread)
    long = list(ratios)
    verdicts = decide_groups(equivalence_groups(frame, [0.0, 0.05], long), VerdictConfig(margin=0.10))
    f = equivalence_figures(verdicts, margin=0.10, models=["m-a", "m-b"], starts=starts, long=long)
    want = [f["groups"], f["groups_no_change"], f["groups_slower"], f["groups_faster"], f["groups_undecided"]]
    assert _awk_counts(tmp_path, frame, long, starts, 0.10) == want, [v.line() for v in verdicts]


def test_the_recipe_parses_and_checks_the_awk_against_scipy(tmp_path):
    binary = Binary(tmp_path / "llama-server", "test", "v1", 1, "x", "0" * 64)
    model = {"label": "tiny-q8", "path": "/m/synthetic-tiny-q8-seed0.gguf", "synthetic": True, "preset": "tiny",
             "quant": "Q8_0", "sha256": "ab" * 32, "body": '{"prompt": "it\'s $(touch pwned)", "n_predict": 1}',
             "argv": [str(binary.path), "-m", "/m/x.gguf", "--host", "127.0.0.1", "--port", "4000", "-c", "512"],
             "env": {"LLAMA_CACHE": "/x", "OMP_WAIT_POLICY": "passive"}}
    spec = SimpleNamespace(id="idle-x", claim="a claim", check=[Requirement("groups_slower", "==", 0)])
    path = tmp_path / "recipe.sh"
    write_equivalence_recipe(path, spec=spec, lbench_verdict="holds", binary=binary, models=[model], short=[0.0, 0.05],
                             long=[1.4], starts=2, reps=2, margin=0.1, alpha=0.05, min_samples=5, warmup=3,
                             schedules={1: [0.05, 0.0, 1.4], 2: [1.4, 0.0, 0.05]})
    text = path.read_text()
    assert subprocess.run([BASH, "-n", str(path)]).returncode == 0
    assert "lbench model synth tiny --quant q8 --seed 0 --out tiny-q8.gguf" in text
    assert "for pause in 0.05 0 1.4; do" in text and "for pause in 1.4 0 0.05; do" in text
    assert "env LLAMA_CACHE=\"$WORK/llama-cache\" OMP_WAIT_POLICY=passive \"$LLAMA_SERVER\" -m \"$MODEL_1\"" in text
    # the self-check of awk's t quantiles runs before anything else needs the model
    head = text[:text.index("ask() {")]
    check = subprocess.run([BASH, "-c", head.replace("set -u", "set -u; exit_at_end() { :; }")], capture_output=True,
                           text=True, cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)})
    assert check.returncode == 0, check.stdout + check.stderr
    assert not list(tmp_path.rglob("pwned"))


def test_every_idle_equivalence_spec_gets_a_recipe_that_ends_with_a_verdict(tmp_path):
    from harness.repro.claims import load_claims
    from harness.workloads.idle import pause_schedule

    specs = [s for s in load_claims() if s.scenario == "idle-equivalence"]
    assert specs
    binary = Binary(tmp_path / "llama-server", "test", "v1", 1, "x", "0" * 64)
    for spec in specs:
        p = spec.params
        short, long = [float(x) for x in p["short_pauses_s"]], [float(x) for x in p["long_pauses_s"]]
        models = [{"label": ref, "path": f"/m/{ref}.gguf", "sha256": None, "body": "{}", "env": {},
                   "argv": [str(binary.path), "-m", f"/m/{ref}.gguf", "--port", "1"]} for ref in p["models"]]
        schedules = {s: [x for _, x in pause_schedule(short + long, int(p["reps"]), s)]
                     for s in range(1, int(p["starts"]) + 1)}
        path = tmp_path / f"{spec.id}.sh"
        write_equivalence_recipe(path, spec=spec, lbench_verdict="holds", binary=binary, models=models, short=short,
                                 long=long, starts=int(p["starts"]), reps=int(p["reps"]), margin=float(p["margin"]),
                                 alpha=0.05, min_samples=5, warmup=3, schedules=schedules)
        assert subprocess.run([BASH, "-n", str(path)]).returncode == 0, spec.id
        lines = path.read_text().rstrip().splitlines()
        assert lines[-1] == "fi" and any('echo "verdict:' in line for line in lines[-6:]), spec.id
        for req in spec.check:
            assert f"({req.figure})" in path.read_text(), (spec.id, req.figure)


def test_recipes_carry_the_device_selection_variable(monkeypatch):
    """--device puts GGML_VK_VISIBLE_DEVICES in lbench's own environment: unchanged there, yet the
    recipe must export it or a maintainer's rerun drives another device (or none)."""
    import os

    from harness.repro.lab import changed_env

    from harness.engines.devices import SELECT_ENV

    for var in SELECT_ENV.values():  # whatever the caller's environment selects is not this test's
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GGML_VK_VISIBLE_DEVICES", "0")
    env = {**os.environ, "GGML_METAL_NO_RESIDENCY": "1"}
    assert changed_env(env) == {"GGML_VK_VISIBLE_DEVICES": "0", "GGML_METAL_NO_RESIDENCY": "1"}
    monkeypatch.delenv("GGML_VK_VISIBLE_DEVICES")
    assert changed_env(dict(os.environ)) == {}
