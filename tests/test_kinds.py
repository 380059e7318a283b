"""The kinds of run: a leaf table of facts, one table per layer beside its functions, every part
resolves, and no dispatcher tests a run's kind by name."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import harness
from harness import resources
from harness.errors import BadInput
from harness.kinds import KINDS

PKG = Path(harness.__file__).parent


def _layer_tables():
    from harness.analysis.kinds import DERIVED, SUMMARIZERS
    from harness.history.catalog import METRICS_OF_KIND, SETTINGS_OF_KIND, TABLE_METRICS_OF_KIND
    from harness.report.evidence import SECTIONS
    from harness.report.render import CONTEXTS
    from harness.runs.executors import EXECUTORS

    return {"EXECUTORS": EXECUTORS, "SUMMARIZERS": SUMMARIZERS, "DERIVED": DERIVED, "CONTEXTS": CONTEXTS,
            "SECTIONS": SECTIONS, "SETTINGS_OF_KIND": SETTINGS_OF_KIND, "METRICS_OF_KIND": METRICS_OF_KIND,
            "TABLE_METRICS_OF_KIND": TABLE_METRICS_OF_KIND}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_kind_has_each_part(name):
    """Every kind is started, summarized, reported and bundled as evidence by its layer's table."""
    from harness.schema import TABLES

    tables = _layer_tables()
    for table in ("EXECUTORS", "SUMMARIZERS", "CONTEXTS", "SECTIONS"):  # the parts every kind of run has
        assert callable(getattr(tables[table][name], "prepare", tables[table][name])), f"{name} has no {table}"
    executor = tables["EXECUTORS"][name]
    assert executor.name == name and executor.spec_class() is not None
    kind = KINDS[name]
    assert (resources.templates_dir() / kind.template).is_file()
    assert kind.primary_table in TABLES


def test_each_layer_table_names_known_kinds_only():
    for table, entries in _layer_tables().items():
        assert set(entries) <= set(KINDS), f"{table} names an unknown kind: {set(entries) - set(KINDS)}"


def test_the_table_of_facts_imports_nothing_of_lbench():
    code = "import sys, harness.kinds; print(sorted(m for m in sys.modules if m.startswith('harness.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['harness.kinds']"


def test_unknown_kind_is_a_clear_error(tmp_path):
    from harness.runs.executors import get_executor

    with pytest.raises(BadInput, match="unknown run kind 'nope'"):
        get_executor("nope")


def _names(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_names(e) for e in node.elts)) if node.elts else set()
    return set()


def kind_dispatch_sites(root: Path = PKG) -> list[str]:
    """Comparisons of something named *kind* with a run kind's name (each layer's table of kinds
    is a dict keyed by the name, which this does not flag)."""
    sites = []
    for path in sorted(root.rglob("*.py")):
        if path == root / "kinds.py":
            continue
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left, *node.comparators]
            if not any(_names(o) & set(KINDS) for o in operands):
                continue
            text = ast.get_source_segment(source, node) or ""
            if "kind" in text:
                sites.append(f"{path.relative_to(root.parent)}:{node.lineno}: {text}")
    return sites


def test_no_kind_dispatch_outside_the_registry():
    sites = kind_dispatch_sites()
    assert not sites, ("dispatch on a run's kind belongs in a table of kinds (harness/kinds.py for a fact, the "
                       "layer's table for a function):\n" + "\n".join(sites))


def test_the_guard_finds_a_kind_test(tmp_path):
    pkg = tmp_path / "harness"
    pkg.mkdir()
    (pkg / "x.py").write_text('def f(run):\n    if run.manifest.get("kind") in ("idle", "calibrate"):\n'
                              '        return 1\n    return prep.kind == "swap"\n')
    assert len(kind_dispatch_sites(pkg)) == 2


def test_commands_run_kinds_through_the_registry():
    """The commands reach each kind through EXECUTORS (``get_executor(name).prepare`` / ``.execute``), never
    a kind's prepare or execute function directly, so every kind is called the same way."""
    direct = []
    for path in sorted((PKG / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and any(a.name.startswith(("prepare_", "execute_"))
                                                        for a in node.names):
                direct.append(f"{path.name}:{node.lineno}")
    assert not direct, f"call kinds via harness.runs.executors.get_executor(name).prepare/.execute: {direct}"


def test_the_store_keeps_what_was_measured_and_the_analysis_derives(tmp_path):
    """A swap run's requests.served_as is derived by the analysis (analysis.kinds.analysis_table), never
    written into the stored tables: the Parquet copy holds what the journal holds."""
    import pandas as pd

    from harness.analysis.kinds import analysis_table
    from harness.store import RunWriter, open_run

    w = RunWriter(tmp_path, "swap", {"config": {"models_max": 1}})
    for t, kind in ((0.01, "queued"), (0.011, "wait"), (0.012, "spawn"), (0.2, "proxy"), (0.5, "proxy")):
        w.append({"t_s": t, "source": "router", "kind": kind, "model": "a", "detail": "{}", "text": ""}, "events")
    for i, (t_send, t_done) in enumerate(((0.0, 0.25), (0.49, 0.52))):
        w.append({"index": i, "wave": i, "model": "a", "t_send_s": t_send, "t_done_s": t_done, "http_status": 200,
                  "latency_ms": (t_done - t_send) * 1000}, "requests")
    w.finish("complete")
    stored = pd.read_parquet(w.dir / "requests.parquet")
    assert "served_as" not in stored or stored["served_as"].isna().all()
    assert list(analysis_table(open_run(w.dir, tmp_path), "requests")["served_as"]) == ["own_load", "resident"]
