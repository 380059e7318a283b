"""The core install without the history extra (``pip install lbench`` against ``lbench[history]``):
its modules import, a run finishes unsigned and says so, and the history commands exit 2 naming
the extra.  The extra is made absent in a child process (``sys.modules[name] = None`` makes both
``import`` and ``importlib.util.find_spec`` see no such module), so nothing is uninstalled."""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys
import tomllib

import harness
from conftest import REPO
from harness.history import EXTRA_MODULES, INSTALL_EXTRA, missing_extra

BLOCK = "import sys\nfor _m in %r: sys.modules[_m] = None\n" % (sorted(EXTRA_MODULES),)


def _without_extra(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {}), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", BLOCK + code, *args], capture_output=True, text=True,
                          cwd=REPO, env=full_env, timeout=600)


def _cli_without_extra(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return _without_extra("from harness.cli import main\nsys.argv = ['lbench', *sys.argv[1:]]\nmain()", *args, env=env)


def test_the_extra_lists_what_its_modules_come_from():
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    named = {req.split(">")[0].split("[")[0] for req in extra["history"]}
    assert named == set(EXTRA_MODULES.values())
    core = {req.split(">")[0].split("[")[0].split("<")[0]
            for req in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]}
    assert not core & named, "the history's dependencies belong to the extra, not the core"
    assert "lbench[history]" in extra["test"], "the suite tests the history: the test extra pulls it"
    assert missing_extra() == [], "this test environment has the extra (pip install -e '.[test]')"


def test_every_core_module_imports_without_the_extra():
    names = [m.name for m in pkgutil.walk_packages(harness.__path__, "harness.") if ".bundled" not in m.name and m.name != "harness.__main__"]
    code = ("import importlib, json\nbad = {}\n"
            f"for name in {names!r}:\n"
            "    try:\n        importlib.import_module(name)\n"
            "    except ImportError as exc:\n        bad[name] = str(exc)\n"
            "print(json.dumps(bad))")
    proc = _without_extra(code)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == {}
    assert len(names) > 150  # the walk found the package, not an empty folder


def test_a_run_without_the_extra_finishes_unsigned_and_says_so(tmp_path):
    code = ("from pathlib import Path\nfrom harness import kinds\nkinds.install()  # imports every kind: no extra needed\n"
            "from harness.runs.session import RunSession\n"
            "class Said:\n    def message(self, text): print('MESSAGE', text)\n"
            "with RunSession(Path(sys.argv[1]), 'idle', {'config': {}, 'models': [], 'cells': []}, Said()) as s:\n"
            "    pass\n"
            "print('DIR', s.dir)")
    proc = _without_extra(code, str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    run_dir = next(line.split(" ", 1)[1] for line in proc.stdout.splitlines() if line.startswith("DIR "))
    manifest = json.loads((tmp_path / run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert not (tmp_path / run_dir / "signature.json").exists()
    assert f"the run is unsigned: signing comes with the history extra ({INSTALL_EXTRA}" in proc.stdout


def test_history_commands_without_the_extra_exit_2_and_name_it(tmp_path, lbench_env):
    archive = str(tmp_path / "archive")
    for args in (("history", "list", "--archive", archive), ("history", "add", str(tmp_path), "--archive", archive),
                 ("history", "key"), ("trend", "--archive", archive),
                 ("gate", "--baseline", "history:idle-warm-p50", "--candidate", "latest")):
        proc = _cli_without_extra(*args, env=lbench_env)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert "needs lbench's history extra (duckdb, cryptography, apache-otava not installed)" in proc.stderr, args
        assert INSTALL_EXTRA in proc.stderr, args
        assert "Traceback" not in proc.stderr, args
    helped = _cli_without_extra("history", "--help", env=lbench_env)
    assert helped.returncode == 0 and INSTALL_EXTRA in " ".join(helped.stdout.split())
