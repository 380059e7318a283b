"""A router whose probed-free port is taken before it binds retries on a new port, as single
servers do (issue 12, class 9); any other start failure is not retried."""

import socket

import pytest

from harness.engines import router as router_mod
from harness.engines.binary import locate
from harness.engines.loopback import free_port
from harness.engines.router import RouterModel, RouterProcess, port_was_taken
from harness.errors import EngineError
from harness.models.resolve import resolve


def test_only_a_bind_failure_counts_as_a_taken_port():
    assert port_was_taken("main: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 4000")
    assert port_was_taken("error: Address already in use")
    assert not port_was_taken("error: invalid argument: --nope")


@pytest.mark.engine
def test_router_retries_when_its_port_is_taken(engine_env, tmp_path, monkeypatch):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    ports = iter([taken.getsockname()[1]])
    monkeypatch.setattr(router_mod, "free_port", lambda: next(ports, None) or free_port())
    (tmp_path / "logs").mkdir()
    model = resolve("tiny-q8")
    try:
        with RouterProcess(locate(), [RouterModel("tiny", model.path)], models_max=1, run_dir=tmp_path) as r:
            assert r.port_attempts == 2 and r.port != taken.getsockname()[1]
    finally:
        taken.close()


@pytest.mark.engine
def test_a_bad_router_flag_fails_at_once_without_retries(engine_env, tmp_path):
    (tmp_path / "logs").mkdir()
    model = resolve("tiny-q8")
    with pytest.raises(EngineError, match="exited"):
        RouterProcess(locate(), [RouterModel("tiny", model.path)], models_max=1, run_dir=tmp_path,
                      unsafe_args=["--no-such-flag"])  # past the allow-list, knowingly
    assert "--no-such-flag" in (tmp_path / "logs" / "router.stderr.log").read_text()
