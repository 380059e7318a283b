"""lbench gate --backend: runs of another backend are refused (exit 2), naming each run's backend."""

from conftest import run_cli
from test_gate_cli import flat, make_idle_run


def test_gate_refuses_runs_of_another_backend(tmp_path):
    root = tmp_path / "results"
    a, b = make_idle_run(root, seed=1), make_idle_run(root, seed=2)  # written without a backend: cpu on Linux
    r = run_cli("gate", "--baseline", a, "--candidate", b, "--backend", "vulkan", "--results", str(root))
    assert r.returncode == 2, r.stderr + r.stdout
    assert f"runs of another backend than vulkan: {a} (cpu), {b} (cpu)" in flat(r.stderr)
    r = run_cli("gate", "--baseline", a, "--candidate", b, "--backend", "cpu", "--results", str(root))
    assert r.returncode in (0, 1, 3), r.stderr + r.stdout  # a verdict, whatever it is
    r = run_cli("gate", "--baseline", a, "--candidate", b, "--backend", "nosuch", "--results", str(root))
    assert r.returncode == 2 and "unknown backend 'nosuch'" in flat(r.stderr)
