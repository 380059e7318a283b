"""A run that cannot sleep unnoticed: a power assertion while lbench runs, and a clock that counts
sleep compared with the one that does not, across each pause.

lbench times pauses with ``time.perf_counter``.  On macOS that is ``mach_absolute_time``, which
"does not increment while the system is asleep" (Apple's documentation; python/cpython#116781),
so a sleep inside a pause is invisible in ``pause_actual_s``.  On Linux ``perf_counter`` is
``CLOCK_MONOTONIC``, which also stops in suspend.  The clock that keeps counting is
``CLOCK_BOOTTIME`` on Linux and ``CLOCK_MONOTONIC`` on macOS (there it "is incremented while the
system is asleep"; ``CLOCK_UPTIME_RAW`` is the one that is not: llvm review D74341, macOS
``clock_gettime(3)``).  Elsewhere (Windows) ``time.time`` stands in: a wall-clock step (NTP) can
then read as a sleep, which the flag's text says.

``slept_s(before, after)`` = (sleep-counting clock delta) - (perf_counter delta); a pause with
more than ``SLEEP_FLAG_S`` is flagged.  The power assertion on macOS is ``caffeinate -i -w PID``
(prevents idle sleep while PID lives; it exits by itself when lbench does).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

SLEEP_FLAG_S = 0.5  # far above clock-read jitter (microseconds), far below any real sleep (seconds)


def _clock(name: str) -> Callable[[], float] | None:
    """``clock_gettime`` of the named clock id, when this platform has both (None otherwise)."""
    clock_id = getattr(time, name, None)
    gettime = getattr(time, "clock_gettime", None)
    if clock_id is None or gettime is None:
        return None
    return lambda: float(gettime(clock_id))


WALL = "time.time (wall clock: a clock step can read as a sleep)"


def sleep_clock(platform: str | None = None) -> tuple[str, Callable[[], float]]:
    """(name, function) of the clock that keeps counting while the machine sleeps.  Only the
    running platform's clock can be read; asked about another platform, the name is said and
    the function falls back to time.time."""
    platform = platform or sys.platform
    name = "CLOCK_BOOTTIME" if platform.startswith("linux") else "CLOCK_MONOTONIC" if platform == "darwin" else None
    if name is None:
        return WALL, time.time
    return name, _clock(name) or time.time


@dataclass(frozen=True)
class Stamp:
    """One reading of both clocks."""

    awake_s: float  # time.perf_counter: stops while the machine sleeps (macOS, Linux)
    total_s: float  # the sleep-counting clock


class SleepWatch:
    """Stamps on both clocks; ``slept_s`` between two stamps."""

    def __init__(self, clock: Callable[[], float] | None = None, name: str | None = None) -> None:
        found_name, found = sleep_clock()
        self.clock = clock or found
        self.clock_name = name or found_name

    def stamp(self) -> Stamp:
        return Stamp(time.perf_counter(), self.clock())


def slept_s(before: Stamp, after: Stamp) -> float:
    """Seconds the sleep-counting clock advanced beyond perf_counter between two stamps (>= 0)."""
    return max(0.0, (after.total_s - before.total_s) - (after.awake_s - before.awake_s))


def is_sleep(slept: float | None, threshold_s: float = SLEEP_FLAG_S) -> bool:
    return slept is not None and slept > threshold_s


def sleep_warning(slept: list[float | None], clock_name: str, threshold_s: float = SLEEP_FLAG_S) -> str | None:
    """One run-quality sentence when any pause contained a sleep (None otherwise)."""
    hits = [s for s in slept if s is not None and is_sleep(s, threshold_s)]
    if not hits:
        return None
    return (f"the machine slept during {len(hits)} pause(s) (up to {max(hits):.1f} s, by {clock_name} against "
            "perf_counter): those samples measured a wake from sleep, not the idle pause they name; "
            "see the slept_s column")


class PowerAssertion:
    """Keeps the machine from idle-sleeping while this process runs (macOS: ``caffeinate -i -w PID``).

    ``held`` says whether one is held; ``why_not`` says why not (another platform, no caffeinate).
    The child is ended by ``release`` and exits by itself when this process does (``-w``)."""

    def __init__(self, pid: int, *, platform: str | None = None, which: Callable[[str], str | None] | None = None):
        import shutil

        self.pid = pid
        self.proc: subprocess.Popen | None = None
        self.why_not: str | None = None
        platform = platform or sys.platform
        if platform != "darwin":
            self.why_not = f"no power assertion on {platform}: sleep is detected, not prevented"
            return
        exe = (which or shutil.which)("caffeinate")
        if exe is None:
            self.why_not = "caffeinate not found: sleep is detected, not prevented"
            return
        self.argv = [exe, "-i", "-w", str(pid)]

    @property
    def held(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def acquire(self) -> PowerAssertion:
        if self.why_not is None and self.proc is None:
            try:
                self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                             stderr=subprocess.DEVNULL)
            except OSError as exc:
                self.why_not = f"caffeinate could not start: {exc}"
        return self

    def release(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def as_dict(self) -> dict:
        return {"held": self.held, "tool": "caffeinate -i -w" if self.why_not is None else None,
                "why_not": self.why_not}

    def __enter__(self) -> PowerAssertion:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
