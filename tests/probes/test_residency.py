"""Residency sets in effect, decided from the machine (macOS version, the engine's SDK and
architecture, the cell's setting), never from the log line (probes/residency.py)."""

from pathlib import Path

from harness.probes import residency
from harness.probes.residency import decide, keep_alive_seconds, note, parse_build_version

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "macos"


def test_build_version_from_real_otool_output():
    # `otool -l` on Xcode's XCTest.framework, quoted as a command's stdout in a public Swift test
    # (SwiftPackageManagerGraphGenerator tests, found by code search; which repository holds it was not
    # confirmed): the arm64 slice has LC_VERSION_MIN_IPHONEOS, the arm64e slice LC_BUILD_VERSION
    text = (FIX / "otool_l_build_version_xctest.txt").read_text()
    assert parse_build_version(text) == {"platform": "IOS", "minos": "14.0", "sdk": "15.0"}
    assert parse_build_version("Load command 8\n      cmd LC_VERSION_MIN_IPHONEOS\n") == {}
    assert parse_build_version("") == {}


def test_sets_in_effect_only_with_sdk_15_macos_15_and_arm64():
    d = decide("default", macos="15.6", sdk="15.2", arch="arm64")
    assert d.in_effect is True and d.keep_alive_s == 180 and d.applies is True and note(d) is None
    d = decide("30", macos="26.1", sdk="26.0", arch="arm64")
    assert d.in_effect is True and d.keep_alive_s == 30 and d.applies is True and note(d) is None
    d = decide("none", macos="15.6", sdk="15.2", arch="arm64")
    assert d.in_effect is False and d.applies is True and note(d) is None


def test_macos_14_creates_no_set_whatever_the_log_says():
    for setting in ("none", "30"):
        d = decide(setting, macos="14.6.1", sdk="15.2", arch="arm64")
        assert d.compiled_in is True and d.in_effect is False and d.applies is False
        assert "has no effect here" in note(d) and "macOS 14.6.1" in note(d)
    d = decide("default", macos="14.6.1", sdk="15.2", arch="arm64")
    assert d.in_effect is False and d.applies is True and note(d) is None  # default is what the engine does


def test_sdk_older_than_15_compiles_sets_out_so_none_is_default():
    d = decide("none", macos="15.6", sdk="14.5", arch="arm64")
    assert d.compiled_in is False and d.in_effect is False and d.applies is False
    assert "GGML_METAL_NO_RESIDENCY" in note(d)
    assert decide("default", macos="15.6", sdk="14.5", arch="arm64").in_effect is False


def test_x86_64_build_has_no_sets():
    d = decide("30", macos="15.6", sdk="15.2", arch="x86_64")
    assert d.compiled_in is False and d.applies is False and "x86_64" in note(d)


def test_unknown_facts_are_undecided_not_applied():
    d = decide("none", macos="15.6", sdk=None, arch="arm64")
    assert d.in_effect is None and d.applies is None and "not decided" in note(d)
    d = decide("30", macos=None, sdk="15.2", arch="arm64")
    assert d.compiled_in is True and d.in_effect is None and d.applies is None


def test_keep_alive_as_ggml_reads_it():
    # ggml-metal-device.m: atoi, and <= 0 gives the default 180 s
    assert keep_alive_seconds("default") == 180 and keep_alive_seconds("none") is None
    assert keep_alive_seconds("30") == 30 and keep_alive_seconds("0") == 180 and keep_alive_seconds("-5") == 180


def test_sdk_of_without_otool_is_empty(tmp_path, monkeypatch):
    monkeypatch.setattr(residency.shutil, "which", lambda name: None)
    assert residency.sdk_of(tmp_path / "llama-server") == {}
