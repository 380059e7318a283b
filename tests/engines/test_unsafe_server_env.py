"""Where llama-server and the router start (issue 47): a variable passed knowingly with
``--unsafe-server-env`` reaches the real server's environment (``/proc/<pid>/environ``), the router's
and its child's, and the run's manifest; a flag or variable the allow-list refuses that bypassed the
entry points (an API caller) is refused where the server starts, and nothing is spawned.

Real llama-server (build 11434) and router on the generated tiny-q8 model.  ``LD_PRELOAD=libm.so.6``
is the refused variable: it "loads code into the server", and libm is a library llama-server maps
anyway, so loading it changes nothing about the server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import psutil
import pytest

from harness.engines.base import Setting
from harness.engines.binary import locate
from harness.engines.llama_server import LlamaServerEngine
from harness.engines.router import RouterModel, RouterProcess
from harness.errors import BadInput
from harness.models.resolve import resolve
from harness.runs.idle import make_engine
from harness.spec import IdleSpec
from conftest import llama_server_processes, run_cli

pytestmark = [pytest.mark.engine,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/environ")]

PRELOAD = "libm.so.6"
TAG = "MY_TRACE_TAG"  # not on lbench's list: refused without the override


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)


def test_the_override_reaches_the_real_servers_environment(engine_env, tmp_path):
    spec = IdleSpec(models=["tiny-q8"], unsafe_server_env=[f"LD_PRELOAD={PRELOAD}", f"{TAG}=h47c value"]).validate()
    _, engine = make_engine(spec, None, {})  # the spec -> EngineOptions -> engine path a run takes
    model = resolve("tiny-q8")
    with engine.start(model.path, Setting(), tmp_path / "server.log") as server:
        env = _environ(server.pid)
        assert env["LD_PRELOAD"] == PRELOAD and env[TAG] == "h47c value", sorted(env)
        answer = server.complete_one_token()  # the server works with it
        assert answer.http_status == 200 and answer.error is None, answer
    _, overrides = engine.environment(Setting())
    assert overrides[TAG] == "h47c value" and overrides["LD_PRELOAD"] == PRELOAD  # what a cell records


def test_the_override_reaches_the_router_and_its_child(engine_env, tmp_path):
    (tmp_path / "logs").mkdir()
    model = resolve("tiny-q8")
    with RouterProcess(locate(), [RouterModel("tiny", model.path)], models_max=1, run_dir=tmp_path,
                       unsafe_env={"LD_PRELOAD": PRELOAD, TAG: "router"}) as router:
        assert _environ(router.pid)["LD_PRELOAD"] == PRELOAD
        r = httpx.post(f"{router.base_url}/completion", json={"model": "tiny", "prompt": "Hi", "n_predict": 1},
                       timeout=600, trust_env=False)
        assert r.status_code == 200, r.text
        (child,) = psutil.Process(router.pid).children()  # the model is loaded: its child runs
        env = _environ(child.pid)
        assert env["LD_PRELOAD"] == PRELOAD and env[TAG] == "router", sorted(env)


def test_a_refused_flag_or_variable_that_skipped_the_entry_points_starts_nothing(engine_env, engine_binary,
                                                                                 tmp_path):
    model = resolve("tiny-q8")
    before = {p.pid for p in llama_server_processes(engine_binary)}
    cases = [(LlamaServerEngine(locate(), extra_args=["--rpc", "10.0.0.2:50052"]), Setting(), "another machine"),
             (LlamaServerEngine(locate()), Setting(server_args=("--tools", "all")), "runs commands"),
             (LlamaServerEngine(locate()), Setting(env=(("LD_PRELOAD", PRELOAD),)), "loads code"),
             (LlamaServerEngine(locate(), unsafe_env={"LLAMA_ARG_PORT": "80"}), Setting(), "reserved")]
    for i, (engine, setting, why) in enumerate(cases):
        log = tmp_path / f"server{i}.log"
        with pytest.raises(BadInput, match=why) as exc:
            engine.start(model.path, setting, log)
        assert "applied again where the server starts" in str(exc.value.where), exc.value.render()
        assert not log.exists()  # no server was spawned (it would have opened its log)
    for i, kw in enumerate(({"extra_args": ["--rpc", "10.0.0.2:50052"]}, {"extra_env": {"LD_PRELOAD": PRELOAD}},
                            {"env_axis": (("HOME", "/tmp"),)})):
        run_dir = tmp_path / f"router{i}"
        run_dir.mkdir()
        with pytest.raises(BadInput, match="router start: the allow-list"):
            RouterProcess(locate(), [RouterModel("tiny", model.path)], models_max=1, run_dir=run_dir, **kw)
        assert not (run_dir / "preset.ini").exists()
    new = {p.pid for p in llama_server_processes(engine_binary)} - before  # an earlier test's may still be ending
    assert not new, new


def test_a_run_records_and_warns_and_its_rerun_script_says_so(engine_env, tmp_path):
    r = run_cli("idle", "-m", "tiny-q8", "--pauses", "0", "--reps", "1", "--warmup", "0", "--self-check", "0",
                "--no-report", "--unsafe-server-env", f"LD_PRELOAD={PRELOAD}", "--unsafe-server-env", f"{TAG}=1",
                env=engine_env)
    assert r.returncode == 0, r.stdout + r.stderr
    text = " ".join(r.stderr.split())  # said as the run starts, with the run's other messages
    assert "warning: passed knowingly past lbench's server allow-list" in text, r.stderr
    assert f"LD_PRELOAD={PRELOAD} (loads code into the server)" in text
    (run_dir,) = [d for d in Path(engine_env["LBENCH_RESULTS_DIR"]).iterdir() if d.is_dir()]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["config"]["unsafe_server_env"] == [f"LD_PRELOAD={PRELOAD}", f"{TAG}=1"]
    assert manifest["cells"][0]["env_overrides"][TAG] == "1"
    r = run_cli("evidence", run_dir.name, "--out", str(tmp_path / "ev"), env=engine_env)
    assert r.returncode == 0, r.stdout + r.stderr
    (script,) = list((tmp_path / "ev").rglob("rerun-*.sh"))[:1]
    text = script.read_text()
    assert "# WARNING: passed knowingly past lbench's server allow-list (--unsafe-server-env)" in text
    assert f'env LD_PRELOAD={PRELOAD} {TAG}=1 "$LLAMA_SERVER" ' in text  # the server's only, not curl's
    assert "export LD_PRELOAD" not in text and f"export {TAG}" not in text
