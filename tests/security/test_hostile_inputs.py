"""Hostile input (issue 26, class 7): spec files and claim files are untrusted, so whatever they
hold ends in a spec or in BadInput (exit 2), never in another exception; the fixed cases of the
issue (bounds, names, run refs, baselines with links, evidence paths) are checked one by one.
No server is started: every case is refused before one would be."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from conftest import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.errors import BadInput
from harness.repro.claims import load_claim
from harness.spec import IdleSpec, SwapSpec, load_spec, load_swap_spec

# ---- a TOML writer for generated values (stdlib has a reader only) ---------------------------------


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a TOML basic string
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(v)


def toml_doc(table: dict, section: str | None = None) -> str:
    lines = [f"[{section}]"] if section else []
    lines += [f"{json.dumps(k)} = {toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


scalars = st.one_of(st.booleans(), st.integers(min_value=-2**70, max_value=2**70), st.floats(allow_nan=True),
                    st.text(max_size=20))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(min_size=1, max_size=8), inner,
                                                                       max_size=3)), max_leaves=12)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                         HealthCheck.too_slow])


def _only_bad_input(load, path: Path) -> None:
    try:
        load(path)
    except BadInput:
        pass  # refused, with what and where: what a spec from elsewhere may end in


@FUZZ
@given(st.dictionaries(st.sampled_from([f for f in IdleSpec.__dataclass_fields__] + ["junk"]), values, max_size=6),
       st.sampled_from([None, "idle"]))
def test_idle_spec_files_end_in_a_spec_or_bad_input(tmp_path, table, section):
    path = tmp_path / "idle.toml"
    path.write_text(toml_doc(table, section))
    _only_bad_input(load_spec, path)


@FUZZ
@given(st.dictionaries(st.sampled_from([f for f in SwapSpec.__dataclass_fields__] + ["junk"]), values, max_size=6),
       st.sampled_from([None, "swap"]))
def test_swap_spec_files_end_in_a_spec_or_bad_input(tmp_path, table, section):
    path = tmp_path / "swap.toml"
    path.write_text(toml_doc(table, section))
    _only_bad_input(load_swap_spec, path)


CLAIM_BASE = {"id": "c", "claim": "x", "source": {"seed": "s.txt", "statement": "s"}, "scenario": "storm"}


@FUZZ
@given(st.dictionaries(st.sampled_from(["id", "claim", "source", "scenario", "engine", "requires", "params",
                                        "check", "timing", "repeat", "tested", "not_tested", "junk"]),
                       values, max_size=5))
def test_claim_files_end_in_a_claim_or_bad_input(tmp_path, changes):
    path = tmp_path / "c.toml"
    path.write_text(toml_doc({**CLAIM_BASE, **changes}))
    _only_bad_input(load_claim, path)


@FUZZ
@given(st.binary(max_size=200))
def test_any_bytes_as_a_spec_or_claim_end_in_bad_input_at_worst(tmp_path, raw):
    for load in (load_spec, load_swap_spec, load_claim):
        path = tmp_path / "any.toml"
        path.write_bytes(raw)
        _only_bad_input(load, path)


# ---- the fixed cases of the issue ---------------------------------------------------------------------

DEEP = "a = " + "[" * 100_000 + "]" * 100_000 + "\n"
SPEC_CASES = {
    "deep-nesting": DEEP,
    "section-not-a-table": "idle = 5\n",
    "invalid-utf8": b"[idle]\nname = \"\xff\xfe\"\n",
    "huge-axes": "[idle]\n" + "\n".join(f"{k} = {list(range(1, 301)) if k != 'poll' else list(range(101))}"
                                        for k in ("threads", "keep_alive", "sleep_idle_seconds", "poll")) + "\n",
    "20000-pauses": "[idle]\npauses_s = [" + ", ".join(["0.5"] * 20_000) + "]\n",
    "reps-1e9": "[idle]\nreps = 1000000000\n",
    "models-not-a-list-of-strings": "[idle]\nmodels = [1, 2]\n",
    "server-args-host": '[idle]\nserver_args = ["--host", "0.0.0.0"]\n',
}
CLAIM_CASES = {
    "check-1": "check = [1]\n",
    "repeat-abc": 'repeat = "abc"\n',
    "repeat-huge": "repeat = 100000000\n",
    "scenario-list": None,  # scenario = [...] replaces the base's
    "params-list": "params = [1, 2]\n",
    "requires-int": "requires = 3\n",
    "timing-string": 'timing = "yes"\n',
    "source-deep": None,
    "reserved-env": '[params]\nreserved = { LLAMA_ARG_PORT = "80" }\n',
    "env-name-injection": '[params]\nreserved = { "A;touch pwned" = "1" }\n',
}


SPEC_SAYS = {"deep-nesting": "nested too deeply", "section-not-a-table": "must be a table", "invalid-utf8": "UTF-8",
             "huge-axes": "cells", "20000-pauses": "more than 10000", "reps-1e9": "reps must be",
             "models-not-a-list-of-strings": "models", "server-args-host": "reserved"}


@pytest.mark.parametrize("case", SPEC_CASES)
def test_fixed_spec_cases_are_bad_input(tmp_path, case):
    path = tmp_path / "s.toml"
    text = SPEC_CASES[case]
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(BadInput, match=SPEC_SAYS[case]):
        load_spec(path)


def _claim_text(case: str) -> str:
    base = 'id = "c"\nclaim = "x"\nsource = { seed = "s.txt", statement = "s" }\n'
    if case == "scenario-list":
        return base + 'scenario = ["storm"]\n'
    if case == "source-deep":
        return 'id = "c"\nclaim = "x"\nscenario = "storm"\nsource = ' + "{a = " * 5000 + "1" + "}" * 5000 + "\n"
    extra = CLAIM_CASES[case]
    head, _, table = extra.partition("[params]") if "[params]" in extra else (extra, "", "")
    return base + 'scenario = "storm"\n' + head + ("[params]" + table if table else "")


@pytest.mark.parametrize("case", CLAIM_CASES)
def test_fixed_claim_cases_are_bad_input(tmp_path, case):
    path = tmp_path / "c.toml"
    path.write_text(_claim_text(case))
    with pytest.raises(BadInput):
        load_claim(path)


def test_a_claim_spec_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "c.toml"
    os.mkfifo(fifo)
    with pytest.raises(BadInput, match="not a regular file"):
        load_claim(fifo)


# ---- the same through the command line: exit 2, no traceback, nothing in results/ --------------------

def _bad_input(r, env) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "lbench: error" in r.stderr, r.stderr[-2000:]
    results = Path(env["LBENCH_RESULTS_DIR"])
    assert not results.exists() or not any(results.iterdir())


@pytest.mark.parametrize("args,says", [
    (["idle", "-m", "tiny-q8", "--reps", "1000000000"], "reps must be"),
    (["idle", "-m", "tiny-q8", "--pauses", ",".join(["0.5"] * 20_000)], "more than 10000"),
    (["swap", "-m", "tiny-q8", "-m", "tiny-q4", "-n", str(10**12)], "requests must be"),
    (["swap", "-m", "tiny-q8", "-m", "tiny-q4", "--pattern", "zipf", "--zipf-s", "nan"], "zipf_s"),
    (["swap", "-m", "tiny-q8", "-m", "tiny-q4", "--pattern", "zipf", "--zipf-s", "inf"], "zipf_s"),
    (["swap", "-m", "tiny-q8", "-m", "tiny-q4", "--n-predict", str(10**12)], "n_predict must be"),
    (["swap", "-m", "tiny-q8", "-m", "tiny-q4", "--models-max", str(10**20)], "models_max must be"),
    (["swap", "-m", "tiny-q8", "-m", "tiny-q4", "--sleep-idle-seconds", str(2**32)], "sleep-idle must be"),
    (["idle", "-m", "tiny-q8", "--sleep-idle-seconds", str(2**32)], "sleep-idle must be"),
    (["report", "r" * 300], "bad run reference"),
    (["evidence", "r" * 300], "bad run reference"),
    (["compare", "a" * 300, "b"], "bad run reference"),
    (["baseline", "save", "latest", "--name", "n" * 300], "bad baseline name"),
    (["baseline", "save", "latest", "--name", "../escape"], "bad baseline name"),
    (["compare", "baseline:../../etc", "b"], "bad baseline name"),
], ids=lambda a: " ".join(a)[:60] if isinstance(a, list) else None)
def test_values_are_checked_before_the_run_directory(lbench_env, args, says):
    r = run_cli(*args, env=lbench_env, timeout=120)
    _bad_input(r, lbench_env)
    assert says in r.stderr, r.stderr[-2000:]


@pytest.mark.parametrize("threshold", [math.nan, math.inf, -0.1])
def test_gate_threshold_must_be_a_finite_margin(threshold):
    from harness.analysis.gate import load_config

    with pytest.raises(BadInput, match="finite"):
        load_config(None, threshold=threshold)


@pytest.mark.parametrize("text", ["[gate]\nthreshold = nan\n", "[gate]\nalpha = \"x\"\n", "gate = 5\n",
                                  "[thresholds]\nlatency_ms = [1]\n", DEEP])
def test_gate_config_files_are_untrusted_too(tmp_path, text):
    from harness.analysis.gate import load_config

    path = tmp_path / "gate.toml"
    path.write_text(text)
    with pytest.raises(BadInput):
        load_config(path)


@pytest.mark.parametrize("case", ["deep-nesting", "section-not-a-table", "invalid-utf8", "20000-pauses"])
def test_spec_files_through_the_command_line(lbench_env, tmp_path, case):
    path = tmp_path / "s.toml"
    text = SPEC_CASES[case]
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    _bad_input(run_cli("idle", "--spec", str(path), env=lbench_env, timeout=120), lbench_env)


@pytest.mark.parametrize("case", ["check-1", "repeat-abc", "scenario-list", "params-list"])
def test_claim_files_through_the_command_line(lbench_env, tmp_path, case):
    claims = tmp_path / "claims"
    claims.mkdir()
    (claims / "c.toml").write_text(_claim_text(case))
    _bad_input(run_cli("repro", "c", env={**lbench_env, "LBENCH_CLAIMS": str(claims)}, timeout=120), lbench_env)
