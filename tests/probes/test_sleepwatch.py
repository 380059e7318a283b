"""Sleep inside a pause: the sleep-counting clock against perf_counter (probes/sleepwatch.py)."""

import sys
import time

import pytest

from harness.probes import sleepwatch
from harness.probes.sleepwatch import PowerAssertion, SleepWatch, Stamp, is_sleep, sleep_warning, slept_s


def test_slept_is_the_difference_of_the_two_clocks():
    before, after = Stamp(awake_s=100.0, total_s=1000.0), Stamp(awake_s=102.0, total_s=1032.0)
    assert slept_s(before, after) == pytest.approx(30.0)
    assert slept_s(before, Stamp(102.0, 1002.0)) == pytest.approx(0.0)
    assert slept_s(before, Stamp(102.0, 1001.9)) == 0.0  # never negative (clock read jitter)
    assert is_sleep(30.0) and not is_sleep(0.01) and not is_sleep(None)


def test_warning_names_the_pauses_and_the_clock():
    assert sleep_warning([0.0, 0.001, None], "CLOCK_BOOTTIME") is None
    text = sleep_warning([0.0, 42.5, 3.0], "CLOCK_BOOTTIME")
    assert "2 pause(s)" in text and "42.5 s" in text and "CLOCK_BOOTTIME" in text


def test_clock_choice_per_platform():
    assert sleepwatch.sleep_clock("darwin")[0] == "CLOCK_MONOTONIC"
    assert sleepwatch.sleep_clock("win32")[0].startswith("time.time")
    if sys.platform.startswith("linux"):
        assert sleepwatch.sleep_clock("linux")[0] == "CLOCK_BOOTTIME"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="CLOCK_BOOTTIME is Linux's")
def test_real_clocks_agree_when_the_machine_stays_awake():
    # the real CLOCK_BOOTTIME and perf_counter (CLOCK_MONOTONIC) across a short real pause: no sleep read
    watch = SleepWatch()
    a = watch.stamp()
    time.sleep(0.05)
    b = watch.stamp()
    assert watch.clock_name == "CLOCK_BOOTTIME"
    assert b.total_s - a.total_s >= 0.05 and not is_sleep(slept_s(a, b))


def test_power_assertion_off_macos_says_why():
    pa = PowerAssertion(1234, platform="linux").acquire()
    assert not pa.held and "detected, not prevented" in pa.why_not
    pa = PowerAssertion(1234, platform="darwin", which=lambda name: None).acquire()
    assert not pa.held and "caffeinate not found" in pa.why_not
    pa = PowerAssertion(1234, platform="darwin", which=lambda name: "/usr/bin/caffeinate")
    assert pa.argv == ["/usr/bin/caffeinate", "-i", "-w", "1234"]
