"""The kinds of run: one object per kind (harness/kinds/<kind>.py) in one list, each complete; the leaf
registry the lower layers read; no per-kind table and no dispatch on a kind's name outside the kinds' folder."""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import harness
from harness import kinds, resources
from harness.errors import BadInput
from harness.kinds import KINDS
from harness.runkind import Part, RunKind, registered, resolve

PKG = Path(harness.__file__).parent
NAMES = {k.name for k in KINDS}


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_every_kind_has_each_part(kind: RunKind):
    """Every kind is started, summarized, reported and bundled as evidence by the parts its object names."""
    from harness.schema import TABLES

    assert isinstance(resolve(kind.spec_class), type)
    for part in ("prepare", "execute", "summarize", "context", "section"):  # the parts every kind of run has
        assert callable(resolve(getattr(kind, part))), f"{kind.name} has no {part}"  # a Part resolves: it exists
    for optional in (kind.derive, kind.history.metrics, kind.history.table_metrics, kind.history.settings):
        assert optional is None or callable(resolve(optional))
    assert (resources.templates_dir() / kind.template).is_file()
    assert kind.primary_table in TABLES


def test_each_module_of_the_folder_is_one_kind_of_the_list():
    """Adding a kind is one module in harness/kinds/ and one line in KINDS: a module left out of the list fails."""
    modules = sorted(p.stem for p in (PKG / "kinds").glob("*.py") if p.stem != "__init__")
    in_folder = {importlib.import_module(f"harness.kinds.{m}").KIND.name for m in modules}
    assert in_folder == NAMES and len(modules) == len(KINDS)
    kinds.install()
    assert list(registered()) == [k.name for k in KINDS]


def test_the_registry_runs_on_nothing_of_lbench_but_errors():
    code = "import sys, harness.runkind; print(sorted(m for m in sys.modules if m.startswith('harness.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['harness.errors', 'harness.runkind']"


def test_a_lower_layer_with_no_kinds_installed_says_so():
    """A program that reads runs through the layers below the CLI without installing the kinds gets an error
    that names the fix, never an empty analysis."""
    code = "from harness.runkind import find_kind; find_kind('idle')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 1 and "harness.kinds.install()" in out.stderr


def test_the_command_installs_the_kinds_when_it_runs_not_for_its_help(tmp_path):
    code = ("import sys\nfrom typer.testing import CliRunner\nfrom harness.cli import app\n"
            "r = CliRunner().invoke(app, ['runs', '--help']); assert r.exit_code == 0, r.output\n"
            "print('harness.kinds' in sys.modules)\n"
            f"r = CliRunner().invoke(app, ['runs', '--results', {str(tmp_path)!r}]); assert r.exit_code == 0, r.output\n"
            "from harness.runkind import registered; print(sorted(registered()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    help_loaded, installed = out.stdout.strip().splitlines()[-2:]
    assert help_loaded == "False" and installed == str(sorted(NAMES))


def test_listing_runs_loads_no_layer_of_the_kinds_parts(tmp_path):
    """The kinds' modules name their parts as ``Part``s (harness/runkind.py), imported when first used: a
    command that lists runs reads the facts and loads none of pandas, scipy, matplotlib, pyarrow, jinja2 for
    them (reading a run's own tables may load pandas; an empty folder needs none)."""
    modules = [m for k in KINDS for m in (k.spec_class, k.execute, k.summarize, k.context, k.section)]
    assert all(isinstance(m, Part) for m in modules if not hasattr(m, "__code__"))  # a plain function: an adapter
    with pytest.raises(ValueError, match="module:attribute"):
        Part("harness.runs.idle")
    code = ("import sys\nfrom typer.testing import CliRunner\nfrom harness.cli import app\n"
            "r = CliRunner().invoke(app, ['runs', '--results', sys.argv[1]]); assert r.exit_code == 0, r.output\n"
            "print(sorted(m for m in ('pandas', 'scipy', 'matplotlib', 'pyarrow', 'jinja2') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_unknown_kind_is_a_clear_error():
    with pytest.raises(BadInput, match="unknown run kind 'nope'"):
        kinds.get("nope")


def _names(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_names(e) for e in node.elts)) if node.elts else set()
    return set()


def _outside_the_kinds(root: Path):
    for path in sorted(root.rglob("*.py")):
        if path == root / "runkind.py" or (root / "kinds") in path.parents:
            continue
        yield path, path.read_text()


def kind_dispatch_sites(root: Path = PKG) -> list[str]:
    """Comparisons of something named *kind* with a run kind's name."""
    sites = []
    for path, source in _outside_the_kinds(root):
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left, *node.comparators]
            if not any(_names(o) & NAMES for o in operands):
                continue
            text = ast.get_source_segment(source, node) or ""
            if "kind" in text:
                sites.append(f"{path.relative_to(root.parent)}:{node.lineno}: {text}")
    return sites


def kind_tables(root: Path = PKG) -> list[str]:
    """Dicts whose keys are all kinds' names, two or more: a per-kind table, which belongs in the kinds'
    objects (a dict that also has other keys, such as the engines' capabilities idle and swap, is not one)."""
    tables = []
    for path, source in _outside_the_kinds(root):
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Dict) and len(node.keys) >= 2:
                keys = [_names(k) if k is not None else set() for k in node.keys]
                if all(len(k) == 1 and k <= NAMES for k in keys):
                    tables.append(f"{path.relative_to(root.parent)}:{node.lineno}: {sorted(set().union(*keys))}")
    return tables


def test_no_kind_dispatch_outside_the_kinds():
    sites = kind_dispatch_sites()
    assert not sites, ("what a kind does belongs in its object (harness/kinds/<kind>.py: a fact or a part), read "
                       "through harness.runkind:\n" + "\n".join(sites))


def test_the_lower_layers_keep_no_table_of_kinds():
    tables = kind_tables()
    assert not tables, "a table keyed by kinds' names: make it a field of RunKind instead:\n" + "\n".join(tables)


def test_the_guards_find_a_kind_test_and_a_table(tmp_path):
    pkg = tmp_path / "harness"
    pkg.mkdir()
    (pkg / "x.py").write_text('def f(run):\n    if run.manifest.get("kind") in ("idle", "calibrate"):\n'
                              '        return 1\n    return prep.kind == "swap"\n'
                              'SUMMARIZERS = {"idle": f, "swap": f}\nCAPABILITIES = {"idle": 1, "swap": 2, "other": 3}\n')
    assert len(kind_dispatch_sites(pkg)) == 2
    assert len(kind_tables(pkg)) == 1  # the table of kinds, not the dict that merely has kinds' names among its keys


def test_commands_run_kinds_through_their_objects():
    """The commands reach each kind through its object (``harness.kinds.get(name).prepare`` / ``.execute``),
    never a kind's prepare or execute function directly, so every kind is called the same way."""
    direct = []
    for path in sorted((PKG / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and any(a.name.startswith(("prepare_", "execute_"))
                                                        for a in node.names):
                direct.append(f"{path.name}:{node.lineno}")
    assert not direct, f"call kinds via harness.kinds.get(name).prepare/.execute: {direct}"


def test_the_store_keeps_what_was_measured_and_the_analysis_derives(tmp_path):
    """A swap run's requests.served_as is derived by the analysis (the swap kind's ``derive``, read by
    analysis.derived.analysis_table), never written into the stored tables: the Parquet copy holds what the
    journal holds."""
    import pandas as pd

    from harness.analysis.derived import analysis_table
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
