"""report/: no import cycles between its modules, no private helpers imported across modules."""

import ast
from pathlib import Path

import harness

PKG = Path(harness.__file__).parent


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):  # function-level imports count too
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("harness"):
            out.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names if a.name.startswith("harness")]
    return out


def test_report_modules_form_no_cycle():
    modules = {f"harness.report.{p.stem}": p for p in (PKG / "report").glob("*.py") if p.stem != "__init__"}
    graph = {}
    for name, path in modules.items():
        deps = set()
        for module, names in _imports(path):
            deps |= {module} & set(modules)
            deps |= {f"{module}.{n}" for n in names} & set(modules)  # from harness.report import plots
        graph[name] = deps

    def visit(node, stack):
        assert node not in stack, "import cycle: " + " -> ".join(stack + [node])
        for dep in graph[node]:
            visit(dep, stack + [node])

    for name in graph:
        visit(name, [])


def test_report_modules_import_no_private_helpers():
    for path in (PKG / "report").glob("*.py"):
        for module, names in _imports(path):
            private = [n for n in names if n.startswith("_")]
            assert not private, f"{path.name} imports private {private} from {module}"
