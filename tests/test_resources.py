"""Bundled data (specs, claims, templates) is found through harness.resources, with user overrides."""

from __future__ import annotations

from pathlib import Path

from harness import resources


def test_bundled_folders_hold_the_data():
    assert (resources.templates_dir() / "idle.html.j2").is_file()
    assert any(resources.claims_dir().glob("router-*.toml"))
    assert "default" in resources.bundled_idle_specs()


def test_overrides_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LBENCH_TEMPLATES", str(tmp_path / "tpl"))
    monkeypatch.setenv("LBENCH_CLAIMS", str(tmp_path / "claims"))
    assert resources.templates_dir() == tmp_path / "tpl"
    assert resources.claims_dir() == tmp_path / "claims"


def test_find_spec_by_name_or_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a bundled name works from any directory
    assert resources.find_spec("default") == resources.idle_specs_dir() / "default.toml"
    assert resources.find_spec("default").is_file()
    own = tmp_path / "mine.toml"
    own.write_text("[idle]\nreps = 2\n")
    assert resources.find_spec(str(own)) == own
    assert resources.find_spec("no-such-spec") == Path("no-such-spec")  # load_spec then says "not found"


def test_the_ci_gate_spec_is_the_least_spread_design_of_docs_statistics():
    from harness.cli.idle import build_spec

    spec = build_spec(Path("ci-gate"))
    assert (spec.threads, spec.cpus, spec.omp_wait, spec.client_cpus) == ([1], ["1"], ["passive"], "0")
    assert spec.pauses_s == [0.0, 1.5] and spec.reps == 8
    doc = (Path(__file__).parents[1] / "docs" / "statistics.md").read_text()
    assert "--spec ci-gate" in doc and "--omp-wait-policy passive" in doc
