"""The per-cell self-check: phases, figures and warnings (scripted server; the engine path is tested in
tests/engines/test_llama_server_knobs.py on the real llama-server)."""

from harness.engines.base import Completion
from harness.workloads.idle import run_floor_block, run_self_check, self_check_figures


class Scripted:
    """Completions that take 2 ms with 1 ms of server time and 0.3 ms of client work; GETs that take
    0.5 ms (fake clock)."""

    def __init__(self) -> None:
        self.t = 100.0
        self.paths: list[str] = []

    def complete_one_token(self) -> Completion:
        self.t += 0.002
        return Completion(self.t - 0.002, self.t, 200, None, {"prompt_ms": 0.8, "predicted_ms": 0.2, "prompt_n": 1},
                          client_ms=0.3)

    def floor(self, path: str) -> Completion:
        self.paths.append(path)
        self.t += 0.0005
        return Completion(self.t - 0.0005, self.t, 200, None)

    def close(self) -> None: ...


def test_self_check_rows_never_measure_and_figures_decompose():
    rows: list[dict] = []
    server = Scripted()
    fig = run_self_check(server, 5, rows.append, warm=2)
    phases = [r["phase"] for r in rows]
    assert "measure" not in phases and phases.count("selfcheck-warmup") == 2 and phases.count("selfcheck") == 5
    assert server.paths == ["/health"] * 5 + ["/slots"] * 5
    assert abs(fig["overhead_p50_ms"] - 1.0) < 1e-6 and abs(fig["floor_http_p50_ms"] - 0.5) < 1e-6
    assert abs(fig["beyond_floor_p50_ms"] - 0.5) < 1e-6  # 2 ms - 1 ms server - 0.5 ms floor
    assert abs(fig["harness_p50_ms"] - 0.3) < 1e-6  # the client's own work, as measured
    assert all(r["client_ms"] == 0.3 for r in rows if r["phase"].startswith("selfcheck"))
    assert any("overhead_p50_ms" in w for w in fig["warnings"]) and any("harness_p50_ms" in w for w in fig["warnings"])


def test_figures_without_server_timings_say_so_without_a_warning():
    fig = self_check_figures([{"phase": "selfcheck", "error": None, "overhead_ms": None, "server_ms": None,
                               "latency_ms": 3.0}])
    assert fig["n"] == 0 and fig["overhead_p50_ms"] is None and "unknown" in fig["note"]
    assert fig["latency_p50_ms"] == 3.0 and fig["warnings"] == []


def test_quiet_figures_have_no_warnings():
    rows = [{"phase": "selfcheck", "error": None, "overhead_ms": 0.3, "server_ms": 1.0, "client_ms": 0.05}] * 4 + \
           [{"phase": "floor-http", "error": None, "latency_ms": 0.2}] * 4
    assert self_check_figures(rows)["warnings"] == []


def test_floor_block_times_gets_after_each_pause():
    rows: list[dict] = []
    run_floor_block(Scripted(), [0.0, 0.01], 2, rows.append)
    assert [r["pause_requested_s"] for r in rows] == [0.0, 0.01, 0.0, 0.01]
    assert all(r["phase"] == "floor-http" and r["floor_path"] == "/health" for r in rows)


def test_servers_without_floor_get_completions_only():
    class NoFloor(Scripted):
        floor = None  # type: ignore[assignment]

    rows: list[dict] = []
    fig = run_self_check(NoFloor(), 3, rows.append, warm=0)
    assert [r["phase"] for r in rows] == ["selfcheck"] * 3 and fig["floor_http_p50_ms"] is None


def test_an_overhead_from_the_server_s_own_work_is_not_called_noise():
    """A large model's server spends ~1 ms per request outside its timings; when lbench's part and the
    HTTP floor are within target, the warning says where the overhead is instead of 'noisy host?'."""
    rows = [{"phase": "selfcheck", "error": None, "overhead_ms": 1.1, "server_ms": 70.0, "client_ms": 0.05}] * 5 + \
           [{"phase": "floor-http", "error": None, "latency_ms": 0.07}] * 5
    (warning,) = self_check_figures(rows)["warnings"]
    assert warning.startswith("self-check overhead_p50_ms 1.100 ms over the target 0.5 ms")
    assert warning.endswith("is the server's untimed work per request, not noise") and "1.030 ms p50" in warning
    # lbench's own part over target: no such reading
    busy = [{**r, "client_ms": 0.9} if r["phase"] == "selfcheck" else r for r in rows]
    assert not any("not noise" in w for w in self_check_figures(busy)["warnings"])
