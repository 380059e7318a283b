"""Which probes exist, the selection, and bad input (a probe asked for where it is absent -> exit 2)."""

from pathlib import Path

import pytest

from harness.errors import BadInput
from harness.probes.devices import registry
from sysfs_layout import ACTIVE, VRAM_USED_LOADED, lay_out_card


def test_no_gpu_here(tmp_path: Path):
    status = registry.describe(sys_root=tmp_path)
    assert status["drm"].startswith("not available: no DRM card")
    assert status["fdinfo"].startswith("not available")
    assert set(registry.SOURCES) == set(status)
    assert "drm" not in registry.select("auto", status)
    assert registry.select("off", status) == []


def test_amd_card_makes_drm_and_fdinfo_available(tmp_path: Path):
    lay_out_card(tmp_path, {"power/runtime_status": ACTIVE, "mem_info_vram_used": VRAM_USED_LOADED})
    status = registry.describe(sys_root=tmp_path)
    assert status["drm"] == "available (DRM sysfs: 0000:01:00.0 amdgpu)"
    assert status["fdinfo"].startswith("available")
    chosen = registry.select("auto", status)
    assert "drm" in chosen and "vulkan" not in chosen  # Vulkan's budget only where nothing else reads the device
    probes = registry.build(["drm"], None, sys_root=tmp_path)
    assert [p.device for p in probes] == ["0000:01:00.0"]


def test_absent_probe_is_bad_input_naming_what_is_available(tmp_path: Path):
    status = registry.describe(sys_root=tmp_path)
    with pytest.raises(BadInput) as err:
        registry.select("drm", status)
    assert err.value.exit_code == 2
    assert "not available" in str(err.value) and "available here:" in err.value.hint
    with pytest.raises(BadInput) as err:
        registry.select("rocm-smi", status)
    assert "unknown device probe" in str(err.value)


def test_the_page_cache_is_a_pause_probe_of_the_model_file(tmp_path: Path):
    from harness.probes import pagecache

    status = registry.describe(sys_root=tmp_path)
    assert status["pagecache"].startswith("available" if pagecache.available() else "not available")
    model = tmp_path / "m.gguf"
    model.write_bytes(b"\0" * 8192)
    [probe] = registry.build(["pagecache"], None, sys_root=tmp_path, model_path=model)
    assert (probe.name, probe.device) == ("pagecache", "page-cache")
    reading = probe.read()
    if pagecache.available():
        assert 0.0 <= reading["file_resident_pct"] <= 100.0
    assert registry.build(["pagecache"], None, sys_root=tmp_path) == []  # a model on the server: no file to read
