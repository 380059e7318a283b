"""The kind registry: every part resolves, and no dispatcher tests a run's kind by name."""

import ast
from pathlib import Path

import pytest

import harness
from harness import resources
from harness.errors import BadInput
from harness.kinds import KINDS, get_kind

PKG = Path(harness.__file__).parent
PARTS = ("spec_class", "executor", "summarizer", "report_context", "evidence_section")


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_part_of_every_kind_resolves(name):
    kind = KINDS[name]
    for attr in PARTS:
        assert callable(kind.part(attr)), f"{name}.{attr} = {getattr(kind, attr)}"
    assert (resources.templates_dir() / kind.template).is_file()
    from harness.schema import TABLES

    assert kind.primary_table in TABLES


def test_unknown_kind_is_a_clear_error():
    with pytest.raises(BadInput, match="unknown run kind 'nope'"):
        get_kind("nope")


def _names(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_names(e) for e in node.elts)) if node.elts else set()
    return set()


def kind_dispatch_sites(root: Path = PKG) -> list[str]:
    """Comparisons of something named *kind* with a run kind's name, outside harness/kinds.py."""
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
    assert not sites, "dispatch on a run's kind belongs in harness/kinds.py (add a RunKind field):\n" + "\n".join(sites)


def test_the_guard_finds_a_kind_test(tmp_path):
    pkg = tmp_path / "harness"
    pkg.mkdir()
    (pkg / "x.py").write_text('def f(run):\n    if run.manifest.get("kind") in ("idle", "calibrate"):\n'
                              '        return 1\n    return prep.kind == "swap"\n')
    assert len(kind_dispatch_sites(pkg)) == 2


def test_commands_run_kinds_through_the_registry():
    """The commands reach each kind's executor through KINDS, so the table is what runs."""
    executors = {k.executor.partition(":")[2] for k in KINDS.values()}
    direct = []
    for path in sorted((PKG / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and any(a.name in executors for a in node.names):
                direct.append(f"{path.name}:{node.lineno}")
    assert not direct, f"import executors via harness.kinds.get_kind(...).executor_fn(): {direct}"
