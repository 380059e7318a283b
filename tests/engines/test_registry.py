"""The engine registry: capability checks instead of engine-name if-chains.

- no module outside harness/engines/ compares a value with an engine's name;
- a toy engine registered in one call is refused where it lacks a capability (exit-2
  messages: what, where, what to do) and accepted where it has it;
- docs/engines.md lists every registered engine and capability;
- `lbench engine list` shows the engines with their capabilities.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import run_cli
from harness.engines import registry
from harness.engines.registry import EngineKind
from harness.errors import BadInput
from harness.spec import IdleSpec, SwapSpec

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "harness"
# Comparisons with a registered engine's name that are allowed, with the reason.
ALLOWED = {
    # "ollama" there is a model store on disk (~/.ollama/models), a discovery source, not an engine
    ("harness/models/discover.py", "ollama"),
}


def _engine_literals(node: ast.AST, engines: set[str]) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in engines:
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_engine_literals(e, engines) for e in node.elts)) if node.elts else set()
    return set()


def engine_name_comparisons(root: Path = HARNESS) -> list[str]:
    """``x == "mlx"``, ``e in ("llama-server", "ollama")``, ``"llama-idle" in engines`` ...
    anywhere in harness/ outside harness/engines/ (the registry and the engines themselves)."""
    engines = set(registry.names())
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith("harness/engines/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if not isinstance(node, ast.Compare):
                continue
            names = set().union(*(_engine_literals(n, engines) for n in [node.left, *node.comparators]))
            for name in sorted(names):
                if (rel, name) not in ALLOWED:
                    found.append(f"{rel}:{node.lineno}: compares with engine name {name!r}")
    return found


def test_no_engine_name_comparisons_outside_the_engines_package():
    found = engine_name_comparisons()
    assert not found, ("engine-name tests outside harness/engines/ (use a capability from "
                       "engines.registry instead):\n" + "\n".join(found))


def test_the_scan_finds_an_engine_name_test(tmp_path):
    pkg = tmp_path / "harness" / "runs"
    pkg.mkdir(parents=True)
    (pkg / "x.py").write_text('def f(e, es):\n    if e == "mlx":\n        pass\n'
                              '    return "llama-idle" in es or e in ("openai", "other")\n')
    global REPO
    saved, REPO = REPO, tmp_path
    try:
        found = engine_name_comparisons(tmp_path / "harness")
    finally:
        REPO = saved
    assert len(found) == 3 and "'mlx'" in found[0] and "'llama-idle'" in found[1] and "'openai'" in found[2]


@pytest.fixture
def toy(monkeypatch):
    """A toy engine that serves one model over HTTP and nothing else, registered in one call."""
    monkeypatch.setattr(registry, "_ENGINES", dict(registry._ENGINES))
    return registry.register(EngineKind("toy", "a toy server for tests", frozenset({"idle"}), "server-name",
                                        make_server=lambda options: object()))


def test_a_registered_engine_is_listed_and_usable_where_it_can(toy):
    assert "toy" in registry.names() and "toy" in registry.names("idle") and "toy" not in registry.names("swap")
    spec = IdleSpec(models=["some-model"], engines=["toy"]).validate()
    assert spec.server_engine == "toy" and spec.cross_check_engine is None


def test_a_toy_engine_is_refused_where_it_lacks_a_capability(toy):
    with pytest.raises(BadInput) as e:
        SwapSpec(engine="toy").validate()
    err = e.value
    text = str(err) + " " + str(getattr(err, "where", "")) + " " + str(getattr(err, "hint", ""))
    assert "'toy'" in text and "'swap'" in text and "--engine" in text  # what and where
    assert "llama-server" in text and "mlx" in text and "lbench engine list" in text  # what to do
    with pytest.raises(BadInput, match="cache state"):
        IdleSpec(models=["m"], engines=["toy"], cache_state=["cold"]).validate()
    with pytest.raises(BadInput, match="one server engine per run"):
        IdleSpec(models=["m"], engines=["toy", "llama-server"]).validate()
    with pytest.raises(BadInput, match="pairs with llama-server only"):
        IdleSpec(models=["m"], engines=["toy", "llama-idle"]).validate()


def test_swap_refuses_sleep_idle_on_an_engine_without_it():
    with pytest.raises(BadInput, match="sleep idle models") as e:
        SwapSpec(engine="mlx", models=["tiny-f16"] * 2, sleep_idle_seconds=5).validate()
    assert "llama-server" in str(e.value.hint)
    SwapSpec(sleep_idle_seconds=5).validate()  # llama-server has it


def test_register_checks_its_input(monkeypatch):
    monkeypatch.setattr(registry, "_ENGINES", dict(registry._ENGINES))
    with pytest.raises(ValueError, match="unknown capabilities"):
        registry.register(EngineKind("x", "x", frozenset({"teleport"}), "gguf"))
    with pytest.raises(ValueError, match="'swap' needs make_swap"):
        registry.register(EngineKind("x", "x", frozenset({"swap"}), "gguf"))
    with pytest.raises(BadInput, match="unknown engine 'nope'"):
        registry.get("nope")


def test_docs_list_every_engine_and_capability():
    doc = (REPO / "docs" / "engines.md").read_text()
    for kind in registry.all_kinds():
        assert f"`{kind.name}`" in doc, f"docs/engines.md does not describe engine {kind.name}"
        row = next((line for line in doc.splitlines() if line.startswith(f"| `{kind.name}`")), None)
        assert row is not None, f"docs/engines.md has no table row for {kind.name}"
        listed = {c.strip().strip("`") for c in row.split("|")[2].split(",") if c.strip()}
        assert listed == set(kind.capabilities), f"docs/engines.md: capabilities of {kind.name} differ: {listed}"
    for cap in registry.CAPABILITIES:
        assert f"`{cap}`" in doc, f"docs/engines.md does not explain capability {cap}"


def test_engine_list_shows_engines_with_capabilities(lbench_env):
    r = run_cli("engine", "list", env=lbench_env)
    assert r.returncode == 0, r.stderr
    for kind in registry.all_kinds():
        assert kind.name in r.stdout and kind.summary in r.stdout
    assert "capabilities: idle, swap, managed" in r.stdout  # llama-server's line
    assert "no engine builds in the cache" in r.stdout  # the build listing is still there


@pytest.mark.parametrize("engine", ["openai", "ollama", "llama-idle"])
def test_swap_on_an_engine_without_a_swap_backend_exits_2(lbench_env, engine):
    r = run_cli("swap", "--engine", engine, "-n", "2", "--no-report", env=lbench_env)
    assert r.returncode == 2, r.stderr
    assert f"engine '{engine}' lacks the 'swap' capability" in r.stderr
    assert "where:" in r.stderr and "--engine" in r.stderr
    assert "what to do:" in r.stderr and "llama-server, mlx" in r.stderr
    results = Path(lbench_env["LBENCH_RESULTS_DIR"])
    assert not results.exists() or not any(results.iterdir())


def test_match_mode_needs_the_engine_its_cross_check_pairs_with():
    with pytest.raises(BadInput, match="--match llama-idle works with llama-server only") as e:
        IdleSpec(models=["m"], engines=["mlx"], match="llama-idle").validate()
    assert "--match" in e.value.where
    IdleSpec(models=["m"], match="llama-idle").validate()  # llama-server: fine
