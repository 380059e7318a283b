"""The kernel's process events: message parsing on constructed messages, and live events
of a real child where the connector is available (root on Linux)."""

import struct
import subprocess
import time

import pytest

from harness.probes.proc_events import (PROC_EVENT_EXIT, PROC_EVENT_FORK, ChildEvents, ProcEvent, available,
                                        parse)


def message(what: int, t_ns: int, *fields: int) -> bytes:
    # nlmsghdr (16) + cn_msg (20), then proc_event: what, cpu, timestamp_ns, event fields
    return b"\0" * 36 + struct.pack("=IIQ", what, 0, t_ns) + struct.pack(f"={len(fields)}I", *fields)


def test_parse_fork_exit_and_threads():
    assert parse(message(PROC_EVENT_FORK, 5, 10, 10, 11, 11)) == ProcEvent("fork", 5, 11, parent=10)
    assert parse(message(PROC_EVENT_FORK, 5, 10, 10, 12, 11)) is None  # a new thread of process 11
    assert parse(message(PROC_EVENT_EXIT, 7, 11, 11, 0, 17)) == ProcEvent("exit", 7, 11, exit_code=0)
    assert parse(message(PROC_EVENT_EXIT, 7, 12, 11, 0, 17)) is None  # a thread of 11 ended
    assert parse(message(0x2, 7, 1, 1, 1, 1)) is None  # exec and other events
    assert parse(b"short") is None


def test_live_child_events_in_kernel_order():
    ok, why = available()
    if not ok:
        pytest.skip(why)
    listener = ChildEvents()
    try:
        import os

        listener.watch(os.getpid())
        proc = subprocess.Popen(["sleep", "0.05"])
        proc.wait()
        deadline = time.monotonic() + 60  # the events come within milliseconds; a loaded box may take seconds
        while time.monotonic() < deadline and len([e for e in listener.events if e.pid == proc.pid]) < 2:
            time.sleep(0.01)
    finally:
        listener.close()
    mine = [e for e in listener.events if e.pid == proc.pid]
    assert [e.kind for e in mine] == ["fork", "exit"]
    assert mine[1].t_ns - mine[0].t_ns >= 40_000_000  # slept 50 ms, by the kernel's clock
