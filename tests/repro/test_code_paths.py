"""The claim x code-path matrix (experiments/claims/code_paths.toml) against the claims and,
where lbench has unpacked it, the pinned llama.cpp source."""

import subprocess
import sys

import pytest

from harness.repro.claims import load_claims
from harness.repro.code_paths import (DOC_BEGIN, Matrix, Parameter, CodePath, check, enclosing_function, load_matrix,
                                      missing_paths, source_root, stale_paths, uncovered_names)

MATRIX = load_matrix()
ROOT = source_root(MATRIX.build)
needs_source = pytest.mark.skipif(not (ROOT / "tools/server/server-models.cpp").is_file(),
                                  reason=f"the pinned source is not unpacked at {ROOT}")


def test_every_claim_naming_a_parameter_is_on_one_of_its_paths():
    assert uncovered_names(MATRIX, load_claims()) == []


def test_a_claim_naming_an_unlisted_parameter_fails_the_check():
    specs = load_claims()
    stop = next(p for p in MATRIX.parameters if p.name == "stop-timeout")
    # the same parameter with the paths of router-stop-timeout removed
    stripped = Parameter(stop.name, stop.forms, stop.grep, stop.files,
                         tuple(CodePath(x.file, x.function, x.does,
                                        tuple(c for c in x.claims if c != "router-stop-timeout"),
                                        x.unexercised or ("" if len(x.claims) > 1 else "")) for x in stop.paths))
    problems = uncovered_names(Matrix(MATRIX.build, (stripped,)), specs)
    assert "claim router-stop-timeout names stop-timeout but no path of stop-timeout lists it" in problems
    assert any("lists no claim and no reason" in p for p in problems)  # the arg.h path had only that claim
    assert set(problems) <= set(check(Matrix(MATRIX.build, (stripped,)), specs))  # what the module's __main__ reports


def test_the_module_prints_the_matrix_then_runs_the_checks():
    r = subprocess.run([sys.executable, "-m", "harness.repro.code_paths"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith(DOC_BEGIN) and "code-path matrix:" not in r.stderr, r.stderr


def test_the_matrix_covers_the_named_parameters():
    names = {p.name for p in MATRIX.parameters}
    assert {"models_max", "stop-timeout", "model states", "queue and try_claim", "tick and unload_lru", "sleep-idle",
            "load-on-startup", "cancellation"} <= names
    for p in MATRIX.parameters:
        assert p.paths and all(x.claims or x.unexercised for x in p.paths), p.name


@needs_source
def test_every_source_line_of_a_parameter_is_in_a_listed_function():
    assert missing_paths(MATRIX, ROOT) == []


@needs_source
def test_every_listed_function_exists_in_the_source():
    assert stale_paths(MATRIX, ROOT) == []


@needs_source
def test_an_unlisted_path_and_a_stale_function_are_reported():
    models_max = next(p for p in MATRIX.parameters if p.name == "models_max")
    fewer = Parameter(models_max.name, models_max.forms, models_max.grep, models_max.files,
                      tuple(x for x in models_max.paths if x.function != "server_models::unload_lru")
                      + (CodePath("tools/server/server-models.cpp", "server_models::no_such_function", "gone",
                                  ("router-cap",)),))
    m = Matrix(MATRIX.build, (fewer,))
    assert any("in server_models::unload_lru is not listed" in p for p in missing_paths(m, ROOT))
    assert stale_paths(m, ROOT) == ["models_max: tools/server/server-models.cpp: server_models::no_such_function "
                                    "not found in the source"]


def test_enclosing_function_on_a_small_cpp_file(tmp_path):
    src = tmp_path / "x.cpp"
    src.write_text('#define X 10\nstruct sched {\n    bool has_capacity(int n) const {\n        return n < X; // {\n'
                   '    }\n};\nvoid models::load(const std::string & s) {\n    if (s == "}") {\n'
                   '        auto f = [&]() { return 1; };\n    }\n}\nvoid routes::init_routes() {\n'
                   '    this->proxy_post = [this](const req & r) {\n        return 2;\n    };\n}\n')
    assert enclosing_function(src, 1) == "<file scope>"
    assert enclosing_function(src, 4) == "sched::has_capacity"
    assert enclosing_function(src, 9) == "models::load"
    assert enclosing_function(src, 14) == "routes::proxy_post"


def test_docs_claims_md_holds_the_generated_matrix():
    from pathlib import Path

    from harness.repro.code_paths import matrix_markdown

    doc = (Path(__file__).resolve().parents[2] / "docs" / "claims.md").read_text()
    assert matrix_markdown(MATRIX, load_claims()) in doc, "regenerate: python -m harness.repro.code_paths"
