"""`lbench swap --spec`: a TOML swap spec, bundled default, command-line overrides, clear errors."""

import pytest
from conftest import run_cli

from harness import resources
from harness.errors import BadInput
from harness.spec import SwapSpec, load_swap_spec


def test_bundled_default_spec_equals_the_spec_class_defaults():
    path = resources.find_spec("default", "swap")
    assert path == resources.experiments_dir() / "swap" / "default.toml" and path.is_file()
    assert load_swap_spec(path) == SwapSpec().validate()


def test_spec_keys_and_errors(tmp_path):
    good = tmp_path / "s.toml"
    good.write_text('[swap]\nmodels = ["a", "b"]\npattern = "zipf"\nrequests = 7\n')
    spec = load_swap_spec(good)
    assert (spec.models, spec.pattern, spec.requests, spec.models_max) == (["a", "b"], "zipf", 7, 2)
    bad = tmp_path / "bad.toml"
    bad.write_text("[swap]\nrequest = 7\n")
    with pytest.raises(BadInput, match="unknown keys in swap spec: request"):
        load_swap_spec(bad)
    wrong = tmp_path / "wrong.toml"
    wrong.write_text("[swap]\nmodels_max = -1\n")
    with pytest.raises(BadInput, match="models_max must be an integer >= 0"):
        load_swap_spec(wrong)


def test_cli_rejects_a_bad_spec_before_writing_anything(tmp_path, lbench_env):
    bad = tmp_path / "bad.toml"
    bad.write_text('[swap]\npattern = "spiral"\n')
    r = run_cli("swap", "--spec", str(bad), env=lbench_env)
    assert r.returncode == 2 and "unknown pattern 'spiral'" in r.stderr + r.stdout
    results = tmp_path / "results"
    assert not results.exists() or not any(results.iterdir())


@pytest.mark.engine
def test_spec_file_drives_a_run_and_options_override_it(tmp_path, engine_env):
    import json
    from pathlib import Path

    spec = tmp_path / "storm.toml"
    spec.write_text('[swap]\nmodels = ["tiny-q8", "tiny-q4"]\nmodels_max = 1\nrequests = 20\npattern = "ping-pong"\n')
    r = run_cli("swap", "--spec", str(spec), "-n", "4", "--no-report", env=engine_env)
    assert r.returncode == 0, r.stderr + r.stdout
    (run_dir,) = list(Path(engine_env["LBENCH_RESULTS_DIR"]).iterdir())
    config = json.loads((run_dir / "manifest.json").read_text())["config"]
    assert config["models"] == ["tiny-q8", "tiny-q4"] and config["models_max"] == 1
    assert config["pattern"] == "ping-pong" and config["requests"] == 4  # -n overrides the spec
    assert (run_dir / "analysis.json").is_file()
