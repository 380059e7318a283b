"""macOS parsers on the verbatim captures in tests/fixtures/macos/ (and variants)."""

import re
from pathlib import Path

from harness.probes import macos

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "macos"


def fixture(name: str) -> str:
    return (FIX / name).read_text()


def without_remarks(text: str) -> str:
    """A capture as its author quoted it, less the ``  # ...`` remarks the author wrote after the output."""
    return "\n".join(re.sub(r"\s+#.*$", "", line) for line in text.splitlines()) + "\n"


def test_vm_stat_page_size_from_header_and_wired_bytes():
    parsed = macos.parse_vm_stat(fixture("vm_stat_m4_26.5.1.txt"))
    assert parsed["page_size"] == 16384  # Apple Silicon, not 4096
    assert parsed["pages"]["Pages wired down"] == 106741
    assert parsed["pages"]["Translation faults"] == 1896659814  # the quoted key
    assert parsed["wired_bytes"] == 106741 * 16384


def test_vm_stat_variants():
    text = fixture("vm_stat_m4_26.5.1.txt")
    no_file_backed = "\n".join(line for line in text.splitlines() if not line.startswith("File-backed"))
    assert macos.parse_vm_stat(no_file_backed)["wired_bytes"] == 106741 * 16384
    tagged = text + "Pages tagged:                                  1234.\n"
    assert macos.parse_vm_stat(tagged)["pages"]["Pages tagged"] == 1234
    reordered = "\n".join([text.splitlines()[0]] + sorted(text.splitlines()[1:]))
    assert macos.parse_vm_stat(reordered)["wired_bytes"] == 106741 * 16384
    missing = "\n".join(line for line in text.splitlines() if "wired" not in line)
    assert macos.parse_vm_stat(missing)["wired_bytes"] is None  # not available, not 0
    assert macos.parse_vm_stat("garbage") is None


def test_sysctl_with_command_echoes_and_unknown_oid():
    # one machine's commands and output, verbatim: a public validation log ("Run on 2026-09-05, macOS 26.5.1
    # (25F80), Mac14,12 M2 Pro Mac mini, 32 GiB"), found by exact-text search in the code index, which does not
    # return its repository (index file 66485229638); its author's "# 0 means ..." remark is dropped before
    # parsing.  It replaces sysctl_hw.txt, which joined these lines with another machine's brand string
    # (shared/reference/mac-audit-2.md N10)
    s = macos.parse_sysctl(without_remarks(fixture("sysctl_hw_m2pro_26.5.1.txt")))
    assert s == {"hw.model": "Mac14,12", "hw.memsize": "34359738368", "iogpu.wired_limit_mb": "0"}
    # the performance-core split as shared/reference/platform-probes.md quotes it, and the brand string of
    # GitHub's hosted Apple Silicon runners (audit row 12: many hosted-runner logs)
    extra = macos.parse_sysctl("hw.perflevel0.physicalcpu: 8\nhw.perflevel1.physicalcpu: 2\n"
                               "machdep.cpu.brand_string: Apple M1 (Virtual)\n"
                               "sysctl: unknown oid 'iogpu.disable_wired_collector'\n")
    assert "iogpu.disable_wired_collector" not in extra
    facts = macos.macos_facts({**s, **extra}, {}, {})
    assert facts["p_cores"] == 8 and facts["e_cores"] == 2 and facts["memsize_bytes"] == 34359738368
    assert facts["virtual"] is True and facts["iogpu_disable_wired_collector"] is None  # unknown, not 0


def test_sw_vers_two_tabs():
    assert macos.parse_sw_vers(fixture("sw_vers.txt")) == {"ProductName": "macOS", "ProductVersion": "15.6",
                                                           "BuildVersion": "24G84"}


def test_ioreg_whole_quoted_keys():
    perf = macos.parse_ioreg_perf(fixture("ioreg_agx_perfstats_m3pro.txt"))
    assert perf["In use system memory"] == 568164352
    assert perf["In use system memory (driver)"] == 0
    assert perf["Alloc system memory"] == 16749051904
    assert macos.parse_ioreg_gpu(fixture("ioreg_agx_model_m4.txt")) == {"gpu_model": "Apple M4", "gpu_cores": 10}
    assert macos.parse_ioreg_perf("nothing here") == {}


def test_virtual_mac_detection():
    assert macos.is_virtual("Apple M1 (Virtual)", None)
    assert macos.is_virtual("Apple M1", "Apple Paravirtual device")
    assert not macos.is_virtual("Apple M3 Pro", "Apple M3 Pro")


def test_readers_say_not_available_off_macos():
    if not macos.on_macos():
        assert macos.read_wired_bytes() is None and macos.read_gpu_memory() is None
        assert macos.read_macos_facts() is None


def test_pmset_thermal_state_and_power_source():
    from harness.probes.macos import blind_spots, parse_pmset_power_source, parse_pmset_therm, thermal_warnings

    # Apple Silicon (M1 Pro, exelban/stats#749): only the three notes, even while throttling
    quiet = parse_pmset_therm(fixture("pmset_therm_quiet.txt"))
    assert quiet == {}
    # an Intel Mac, not throttled (prometheus/node_exporter#2031)
    intel = parse_pmset_therm(fixture("pmset_therm_intel_unthrottled.txt"))
    assert intel == {"cpu_scheduler_limit": 100, "cpu_available_cpus": 12, "cpu_speed_limit": 100}
    # an Intel Mac throttling, `pmset -g thermlog` (same record format; yujitach/MenuMeters#158)
    hot = parse_pmset_therm(fixture("pmset_thermlog_throttled_intel.txt"))
    assert hot == {"cpu_scheduler_limit": 40, "cpu_available_cpus": 8, "cpu_speed_limit": 28}
    # on battery (spaceship-prompt/spaceship-prompt#640)
    assert parse_pmset_power_source(fixture("pmset_batt_battery.txt")) == "Battery Power"
    assert parse_pmset_power_source("") is None
    assert thermal_warnings({**intel, "power_source": "AC Power"}, {**intel, "power_source": "AC Power"}) == []
    w = " | ".join(thermal_warnings({"power_source": "AC Power"}, {**hot, "power_source": "Battery Power"}))
    assert "CPU speed limited to 28% after the run" in w and "AC Power -> Battery Power" in w
    assert thermal_warnings(None, None) == []
    # what run quality cannot see there is said, not implied
    blind = " | ".join(blind_spots({"thermal": {**quiet, "power_source": "AC Power"}, "unreadable_processes": 41}))
    assert "thermal state unknown" in blind and "41 processes" in blind
    assert blind_spots({"thermal": {**intel}, "unreadable_processes": 0}) == []
    assert blind_spots({"thermal": None}) == []  # not a Mac


def test_virtual_flag_on_every_verdict_and_metal_claims_not_checkable():
    from harness.probes.host import virtual_status

    # the hosted runner's brand string (audit row 12) and hw.model VirtualMac2,1 (hosted-runner logs)
    assert macos.is_virtual("Apple M1", None, "VirtualMac2,1") and macos.is_virtual("Apple M1", None, None, 1)
    assert not macos.is_virtual("Apple M4", "Apple M4", "Mac16,10", 0)
    real = {"os": "Darwin", "cpu_model": "Apple M4", "virtual": False}
    hosted = {"os": "Darwin", "cpu_model": "Apple M1 (Virtual)", "virtual": True}
    assert virtual_status([real, real]) == {"virtual": False, "note": None}
    both = virtual_status([real, hosted])
    assert both["virtual"] is True and "paravirtual" in both["note"] and "Apple M1 (Virtual)" in both["note"]
    assert virtual_status([real, {"os": "Linux"}])["virtual"] is None  # one run did not say: not known
    facts = macos.macos_facts({"machdep.cpu.brand_string": "Apple M1 (Virtual)", "hw.model": "VirtualMac2,1"}, {},
                              {"gpu_model": "Apple Paravirtual device"})
    assert macos.paravirtual_reason(facts).startswith("not checkable here")
    assert macos.paravirtual_reason({**facts, "virtual": False}) is None and macos.paravirtual_reason(None) is None


def test_iogpu_wired_limit_raised_and_dynamic_low_water_mark_from_a_real_status_check():
    # `iogpu.wired_limit_mb` and `iogpu.dynamic_lwm` as a public German-language ds4 setup guide quotes its
    # "lokale Statusprüfung vom 07.08.2026" (a local status check; found by exact-text search in the code index,
    # which does not return its repository: index file 69772047566), verbatim.  No real output of
    # iogpu.wired_lwm_mb or iogpu.disable_wired_collector was found (docs/mac.md says so)
    s = macos.parse_sysctl(fixture("sysctl_iogpu_wired_limit_118000.txt"))
    assert s == {"iogpu.wired_limit_mb": "118000", "iogpu.dynamic_lwm": "1"}
    facts = macos.macos_facts(s, {}, {})
    assert (facts["iogpu_wired_limit_mb"], facts["iogpu_dynamic_lwm"]) == (118000, 1)
    assert facts["iogpu_wired_lwm_mb"] is None and facts["iogpu_disable_wired_collector"] is None  # not read


def test_iogpu_low_water_marks_and_collector_recorded_when_the_oids_exist():
    # decision inputs, not a capture: the values wake-2026-12.md section 4 quotes for a Mac mini M1 8 GB
    # (wired_limit_mb 0, wired_lwm_mb 0, dynamic_lwm 1; quoted reformatted, so not a sysctl fixture)
    facts = macos.macos_facts({"iogpu.wired_limit_mb": "0", "iogpu.wired_lwm_mb": "0", "iogpu.dynamic_lwm": "1"},
                              {}, {})
    assert (facts["iogpu_wired_limit_mb"], facts["iogpu_wired_lwm_mb"], facts["iogpu_dynamic_lwm"]) == (0, 0, 1)
    assert facts["iogpu_disable_wired_collector"] is None  # an oid this macOS lacks: unknown, not 0
    assert {"iogpu.wired_lwm_mb", "iogpu.dynamic_lwm", "iogpu.disable_wired_collector"} <= set(macos.SYSCTL_KEYS)


def test_thermal_pressure_level_from_a_real_notifyutil_capture():
    # `notifyutil -g com.apple.system.thermalpressurelevel`, "measured 2026-09-16, macOS on this box", as a public
    # Python module's docstring quotes it (found by exact-text search in the code index, which does not return its
    # repository: index file 68949911815), verbatim less its author's "# ..." remarks: the key and its state
    text = without_remarks(fixture("notifyutil_thermalpressurelevel.txt"))
    assert macos.parse_notifyutil_level(text) == 0
    # the same capture's second command: notifyutil answers 0, exit 0, for a key that does not exist, so a level
    # of 0 cannot tell "nominal" from "no such key" (docs/mac.md); a reading for another key is not this key's
    assert macos.parse_notifyutil_level(text, "com.apple.system.this.key.does.not.exist") == 0
    other = [line for line in text.splitlines() if "this.key" in line]
    assert macos.parse_notifyutil_level("\n".join(other)) is None


def test_thermal_pressure_without_a_level_is_not_a_reading():
    # only what is not a level; the level names follow the notification's documented values
    assert macos.parse_notifyutil_level("") is None
    assert macos.parse_notifyutil_level("notifyutil: unknown option\n") is None
    assert macos.THERMAL_PRESSURE_LEVELS[0] == "nominal"
    quiet = macos.parse_pmset_therm(fixture("pmset_therm_quiet.txt"))  # Apple Silicon: pmset says nothing
    assert macos.blind_spots({"thermal": quiet})[0].startswith("thermal state unknown")
    assert macos.blind_spots({"thermal": {**quiet, "thermal_pressure_level": 0}}) == []  # a level is known
    assert macos.thermal_warnings({"thermal_pressure_level": 2, "thermal_pressure": "heavy"}, None) == [
        "thermal pressure heavy before the run (com.apple.system.thermalpressurelevel = 2): macOS slows the CPU "
        "and GPU"]
