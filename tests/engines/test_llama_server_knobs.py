"""How CPU wake knobs and the llama-idle match become llama-server arguments and environment."""

from pathlib import Path

import pytest

from harness.engines.base import Setting
from harness.engines.llama_server import (MATCH_ARGS, Binary, LlamaServerEngine, cpu_args, llama_idle_body,
                                          openmp_build)


def engine(tmp_path: Path, openmp: str | None = "ON", **kw) -> LlamaServerEngine:
    build = tmp_path / "build"
    (build / "bin").mkdir(parents=True)
    if openmp is not None:
        # a cache as CMake writes it: the request, and what ggml found (GGML_OPENMP_ENABLED, INTERNAL)
        (build / "CMakeCache.txt").write_text(f"GGML_NATIVE:BOOL=ON\nGGML_OPENMP:BOOL={openmp}\n"
                                              f"GGML_OPENMP_ENABLED:INTERNAL={openmp}\n")
    binary = build / "bin" / "llama-server"
    binary.write_text("")
    return LlamaServerEngine(Binary(binary, "test", "b1", 1, "abc", "0" * 64), **kw)


def test_cpu_args_for_each_knob():
    assert cpu_args(Setting()) == []
    assert cpu_args(Setting(threads=2, poll=0, cpu_strict=True, prio=2, cpu_mask="0x2")) == [
        "-t", "2", "-tb", "2", "--poll", "0", "--cpu-strict", "1", "--prio", "2", "--cpu-mask", "0x2"]


def test_argv_env_and_notes(tmp_path):
    e = engine(tmp_path / "a")
    argv = e.argv(Path("m.gguf"), Setting(threads=1, cpus="1"), 1234)
    assert argv[0].endswith("taskset") and argv[1:3] == ["-c", "1"] and ["-t", "1"] == argv[argv.index("-t"):][:2]
    env, overrides = e.environment(Setting(omp_wait="active", omp_spincount=0))
    assert overrides == {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "0"} and env["GOMP_SPINCOUNT"] == "0"
    assert openmp_build(e.binary.path) is True
    assert any("no effect" in n for n in e.setting_notes(Setting(poll=100)))
    assert e.setting_notes(Setting(omp_wait="active")) == []
    plain = engine(tmp_path / "b", openmp="OFF")
    assert plain.setting_notes(Setting(poll=100)) == []
    assert any("OpenMP" in n for n in plain.setting_notes(Setting(omp_wait="passive")))
    assert openmp_build(engine(tmp_path / "c", openmp=None).binary.path) is None


def test_openmp_read_from_a_sibling_build_folder(tmp_path):
    """lbench's cache: <key>/bin/llama-server beside <key>/build/CMakeCache.txt."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "CMakeCache.txt").write_text("GGML_OPENMP:BOOL=OFF\n")
    assert openmp_build(tmp_path / "bin" / "llama-server") is False


def test_openmp_is_what_ggml_found_not_what_was_asked(tmp_path):
    """On a Mac, Apple clang without libomp: GGML_OPENMP:BOOL=ON is asked, find_package(OpenMP) fails and
    ggml records GGML_OPENMP_ENABLED OFF (ggml/src/CMakeLists.txt of the pinned sdist; the configure log
    "Could NOT find OpenMP ... OpenMP not found" of ggml-org/llama.cpp#10647)."""
    from harness.engines.llama_server import parse_openmp_cache

    mac = "GGML_OPENMP:BOOL=ON\nGGML_OPENMP_ENABLED:INTERNAL=OFF\n"
    linux = "GGML_OPENMP:BOOL=ON\nGGML_OPENMP_ENABLED:INTERNAL=ON\n"  # both keys agree on Linux
    assert parse_openmp_cache(mac) is False and parse_openmp_cache(linux) is True
    assert parse_openmp_cache("GGML_OPENMP:BOOL=ON\n") is None  # asked, result not recorded: unknown
    assert parse_openmp_cache("GGML_OPENMP:BOOL=OFF\n") is False
    (tmp_path / "bin").mkdir()
    (tmp_path / "CMakeCache.txt").write_text(mac)
    e = LlamaServerEngine(Binary(tmp_path / "bin" / "llama-server", "test", "b1", 1, "abc", "0" * 64))
    assert e.setting_notes(Setting(poll=100)) == []  # --poll applies: no OpenMP in this build
    assert any("only affect OpenMP builds" in n for n in e.setting_notes(Setting(omp_wait="passive")))


def test_apple_cpu_knobs_ggml_ignores():
    """ggml-cpu.c (pinned): ggml_thread_apply_affinity is "Not supported on Apple platforms"; a priority
    below normal is "no way to set lower prio on Apple platforms"."""
    from harness.engines.llama_server import apple_cpu_notes

    assert apple_cpu_notes(Setting(threads=1, poll=0)) == []
    assert any("CPU affinity" in n for n in apple_cpu_notes(Setting(cpu_mask="0x2")))
    assert any("CPU affinity" in n for n in apple_cpu_notes(Setting(cpu_strict=True)))
    assert any("lower a thread's priority" in n for n in apple_cpu_notes(Setting(prio=-1)))
    assert apple_cpu_notes(Setting(prio=2)) == []


def test_user_omp_environment_does_not_leak(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    monkeypatch.setenv("GOMP_SPINCOUNT", "5")
    env, overrides = engine(tmp_path).environment(Setting())
    assert "OMP_WAIT_POLICY" not in env and "GOMP_SPINCOUNT" not in env and overrides == {}


def test_match_llama_idle_arguments_and_record(tmp_path):
    e = engine(tmp_path, match="llama-idle")
    argv = e.argv(Path("m.gguf"), Setting(), 1234)
    i = len(argv) - len(MATCH_ARGS)
    assert argv[i:] == MATCH_ARGS and argv[argv.index("-c", argv.index("-c") + 1) + 1] == "512"
    record = e.like_for_like()
    assert record["llama-idle"]["threads"].startswith("4 ") and record["llama-server"]["threads"].startswith("4,")
    assert record["llama-idle"]["n_ctx"] == record["llama-server"]["n_ctx"] == 512
    assert record["cannot_match"] and record["match"] == "llama-idle"
    body = llama_idle_body(7)
    assert body["prompt"] == [7] and body["n_predict"] == 1 and body["top_k"] == 1
    assert "no matching requested" in engine(tmp_path / "d").like_for_like()["cannot_match"][0]


def test_knobs_given_after_match_win(tmp_path):
    """A --threads axis is appended after the match arguments: llama.cpp keeps the last value."""
    argv = engine(tmp_path, match="llama-idle").argv(Path("m.gguf"), Setting(threads=2), 1)
    assert argv.index("-t", argv.index("-t") + 1) > argv.index("-t") and argv[argv.index("-t", argv.index("-t") + 1) + 1] == "2"


@pytest.mark.parametrize("openmp, knobs, limit, note", [
    ("ON", {"threads": 2}, "2", None),
    ("OFF", {"threads": 2}, None, "always runs 4 threads in a build without OpenMP"),
    ("ON", {"threads": 2, "prio": 2, "cpus": "1"}, "2", "cpus, prio: llama-server options"),
    ("ON", {"omp_wait": "active"}, None, None),
])
def test_cross_check_threads_cap_llama_idle_through_openmp(tmp_path, openmp, knobs, limit, note):
    """--threads N reaches llama-idle as OMP_THREAD_LIMIT=N in an OpenMP build; elsewhere a note."""
    from types import SimpleNamespace

    from harness.runs.idle import _cross_check_threads

    (tmp_path / "bin").mkdir()
    (tmp_path / "CMakeCache.txt").write_text(f"GGML_OPENMP:BOOL={openmp}\n")
    prep = SimpleNamespace(engine=SimpleNamespace(binary=SimpleNamespace(path=tmp_path / "bin" / "llama-server")))
    env, overrides = {}, {}
    notes = _cross_check_threads(prep, Setting(**knobs), "llama-idle", env, overrides)
    assert env.get("OMP_THREAD_LIMIT") == limit and overrides.get("OMP_THREAD_LIMIT") == limit
    assert (note is None and notes == []) or any(note in n for n in notes)


def test_the_users_thread_limit_never_reaches_the_server(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_THREAD_LIMIT", "1")
    env, _ = engine(tmp_path).environment(Setting())
    assert "OMP_THREAD_LIMIT" not in env


@pytest.mark.engine
def test_match_mode_and_floor_against_the_real_server(engine_env, tmp_path):
    from harness.engines.binary import locate
    from harness.models.resolve import resolve
    from harness.workloads.idle import run_self_check

    model = resolve("tiny-q8")
    e = LlamaServerEngine(locate(), ctx_size=256, match="llama-idle")
    rows: list[dict] = []
    with e.start(model.path, Setting(threads=1), tmp_path / "server.log") as server:
        assert b'"prompt": [' in server.client.body
        server.complete_one_token()
        c = server.complete_one_token()
        assert c.error is None and c.timings["prompt_n"] == 1 and c.timings["cache_n"] == 0  # BOS at position 0
        assert server.floor("/health").http_status == 200 and server.floor("/slots").http_status == 200
        figures = run_self_check(server, 3, rows.append)
        assert "-t" in server.argv and "512" in server.argv
    assert [r["phase"] for r in rows].count("selfcheck") == 3
    assert [r["phase"] for r in rows].count("floor-http") == 3 and [r["phase"] for r in rows].count("floor-queue") == 3
    assert figures["n"] == 3 and figures["floor_http_p50_ms"] > 0 and figures["overhead_p50_ms"] is not None


def test_oversubscription_is_named_as_the_cause_of_a_noisy_self_check(monkeypatch):
    from harness.runs.idle import oversubscribed
    from harness.runs.preflight import cpu_list as parse_cpu_list

    monkeypatch.setattr("harness.runs.preflight.available_cpus", lambda: {0, 1})
    match = LlamaServerEngine(Binary(Path("/x"), "t", "v", 1, "c", "s"), match="llama-idle")
    assert match.compute_threads(Setting()) == 4 and match.compute_threads(Setting(threads=2)) == 2
    assert "4 compute threads on 2 CPUs" in oversubscribed(Setting(), match.compute_threads(Setting()))
    assert oversubscribed(Setting(threads=2), 2) is None
    assert "2 compute threads on 1 CPUs" in oversubscribed(Setting(threads=2, cpus="1"), 2)
    assert oversubscribed(Setting(), None) is None  # the server's default: its physical cores
    assert parse_cpu_list("0,2-3") == {0, 2, 3} and parse_cpu_list("0+1") == {0, 1}


def test_the_mac_ci_design_uses_only_what_ggml_honours_there():
    """ci-gate's placement (taskset, client pinning, OMP passive) does nothing or fails on a Mac;
    ci-gate-mac keeps one compute thread, which the Mac build honours, and no --poll: with one thread
    ggml starts no worker thread, and only workers poll (pinned source, ggml-cpu.c
    ggml_graph_compute_poll_for_work)."""
    from harness.cli.idle import build_spec
    from harness.engines.llama_server import apple_cpu_notes

    def carried_over(setting) -> bool:  # no knob macOS or ggml's Apple path ignores (taskset, OpenMP, affinity)
        return (setting.cpus is None and setting.omp_wait is None and setting.omp_spincount is None
                and apple_cpu_notes(setting) == [])

    linux = build_spec(Path("ci-gate"))
    assert not all(carried_over(s) for s in linux.settings()) and linux.client_cpus is not None
    assert any(s.cpus is not None for s in linux.settings()) and any(s.omp_wait is not None for s in linux.settings())
    mac = build_spec(Path("ci-gate-mac"))
    assert all(carried_over(s) for s in mac.settings()) and mac.client_cpus is None
    assert (mac.threads, mac.poll, mac.pauses_s, mac.reps) == ([1], [None], linux.pauses_s, linux.reps)


def test_metal_facts_follow_the_binarys_backend_not_the_host(tmp_path, monkeypatch):
    """docs/mac.md finding 6: on an Apple Silicon Mac a CPU-only (or unknown) build gets no -lv 4 facts start and
    no residency verdict; its keep-alive note names the build's backend, not the host.  The host is pretended
    (no Mac here); the residency decision itself is tests/probes/test_residency.py's."""
    import platform

    from harness.probes import residency

    monkeypatch.setattr(platform, "system", lambda: "Darwin")
    monkeypatch.setattr(residency, "apple_silicon", lambda *a: True)
    monkeypatch.setattr(residency, "decide_for", lambda binary, setting: {"note": None, "setting": setting})
    path = tmp_path / "llama-server"
    cpu = LlamaServerEngine(Binary(path, "test", "b1", 1, "abc", "0" * 64, "cpu",
                                   "--list-devices: no GPU device, and it links no GPU backend's library"))
    assert not cpu.metal_available() and cpu.residency(Setting("none")) is None
    assert cpu.startup_facts_log(path, Setting(), tmp_path / "x.log") is None  # no -lv 4 start is made
    (note,) = [n for n in cpu.setting_notes(Setting("none")) if "keep-alive" in n]
    assert "this build's backend is cpu (--list-devices: no GPU device" in note and "no effect" in note
    unknown = LlamaServerEngine(Binary(path, "test", "b1", 1, "abc", "0" * 64, "unknown", "not told"))
    assert not unknown.metal_available()
    metal = LlamaServerEngine(Binary(path, "test", "b1", 1, "abc", "0" * 64, "metal", "links Metal.framework"))
    assert metal.metal_available() and metal.residency(Setting("none")) == {"note": None, "setting": "none"}
