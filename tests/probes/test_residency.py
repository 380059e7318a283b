"""Residency sets in effect, decided from the machine (macOS version, the engine's SDK and
architecture, the cell's setting), never from the log line (probes/residency.py)."""

import itertools
from pathlib import Path

import pytest

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


def test_build_version_of_a_macos_binary_linked_against_sdk_15():
    # `otool -l lute` on a macOS command-line binary, quoted in luau-lang/lute PR #1019
    # (https://github.com/luau-lang/lute/pull/1019, 2026-04-19): newer otool prints the platform as a number
    # (1 = macOS) and the SDK that decides whether residency sets are compiled in (>= 15)
    text = (FIX / "otool_l_build_version_lute_macos.txt").read_text()
    build = parse_build_version(text)
    assert build == {"platform": "1", "minos": "15.0", "sdk": "15.5"}
    assert decide("default", macos="15.6", sdk=build["sdk"], arch="arm64").in_effect is True


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


# ---- one decision for every command: macOS version x SDK x Rosetta x setting (no Mac here: pure inputs) ----

MACOS = ("14.6.1", "15.6", "26.1", None)
SDK = ("14.5", "15.2", "26.0", None)
ENGINE_ARCH = ("arm64", "x86_64")  # under Rosetta lbench's build may come out either way


@pytest.mark.parametrize(("macos", "sdk", "arch", "setting"),
                         list(itertools.product(MACOS, SDK, ENGINE_ARCH, ("default", "none", "30"))))
def test_the_decision_across_macos_sdk_arch_and_setting(macos, sdk, arch, setting):
    d = decide(setting, macos=macos, sdk=sdk, arch=arch)
    sets_exist = arch == "arm64" and sdk not in ("14.5", None) and macos not in ("14.6.1", None)
    undecided = arch == "arm64" and (sdk is None or (sdk != "14.5" and macos is None))
    ok, why = residency.claim_gate(macos, sdk, arch)
    assert ok is sets_exist  # a claim about the sets is checkable only where they exist
    if undecided:
        assert d.applies is None and "not decided" in (note(d) or "not decided")
    elif sets_exist:
        assert d.applies is True and d.in_effect is (setting != "none")
        assert d.keep_alive_s == {"default": 180, "none": None, "30": 30}[setting]
    else:  # compiled out, or macOS 14: 'default' is what the engine does, every other setting changes nothing
        assert d.in_effect is False and d.applies is (setting == "default")
        assert not ok and why.startswith("llama.cpp's Metal residency sets do not exist here")


@pytest.mark.parametrize(("machine", "translated", "expected"), [
    ("arm64", None, True), ("x86_64", "1", True),  # Rosetta: an x86_64 Python on an M-series Mac
    ("x86_64", "0", False), ("x86_64", "", False),  # an Intel Mac (sysctl.proc_translated 0, or no such oid)
])
def test_apple_silicon_also_under_rosetta(machine, translated, expected):
    assert residency.apple_silicon(machine, translated) is expected


def test_the_sdk_that_counts_is_homebrews_metal_library(tmp_path):
    """Homebrew's ggml builds with GGML_BACKEND_DL: Metal is loaded from libexec/libggml-metal.so, whose SDK
    decides (Formula/g/ggml.rb); lbench's own build is static, so its executable decides."""
    prefix = tmp_path / "homebrew"
    binary = prefix / "Cellar" / "llama.cpp" / "7000" / "bin" / "llama-server"
    binary.parent.mkdir(parents=True)
    binary.write_text("")
    assert residency.metal_library(binary, brew_prefixes=[prefix]) == binary  # no backend library: static
    library = prefix / "opt" / "ggml" / "libexec" / "libggml-metal.so"
    library.parent.mkdir(parents=True)
    library.write_text("")
    assert residency.metal_library(binary, brew_prefixes=[prefix]) == library
    own = tmp_path / "build" / "bin" / "llama-server"
    own.parent.mkdir(parents=True)
    own.write_text("")
    assert residency.metal_library(own, brew_prefixes=[prefix]) == own
    (own.parent / "libggml-metal.dylib").write_text("")  # a BACKEND_DL build of one's own: beside the binary
    assert residency.metal_library(own, brew_prefixes=[prefix]) == own.parent / "libggml-metal.dylib"
