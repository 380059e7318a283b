"""DRM fdinfo parsing and the per-process reader, on real and documented fdinfo texts."""

from pathlib import Path

from harness.probes.devices import fdinfo

# https://docs.kernel.org/gpu/xe/xe-drm-usage-stats.html, the example, exact text
XE_DOC = """pos:    0
flags:  0100002
mnt_id: 26
ino:    685
drm-driver:     xe
drm-client-id:  3
drm-pdev:       0000:03:00.0
drm-total-system:       0
drm-shared-system:      0
drm-active-system:      0
drm-resident-system:    0
drm-purgeable-system:   0
drm-total-gtt:  192 KiB
drm-shared-gtt: 0
drm-active-gtt: 0
drm-resident-gtt:       192 KiB
drm-total-vram0:        23992 KiB
drm-shared-vram0:       16 MiB
drm-active-vram0:       0
drm-resident-vram0:     23992 KiB
drm-total-stolen:       0
drm-shared-stolen:      0
drm-active-stolen:      0
drm-resident-stolen:    0
drm-cycles-rcs: 28257900
drm-total-cycles-rcs:   7655183225
drm-cycles-bcs: 0
drm-total-cycles-bcs:   7655183225
drm-cycles-vcs: 0
drm-total-cycles-vcs:   7655183225
drm-engine-capacity-vcs:        2
drm-cycles-vecs:        0
drm-total-cycles-vecs:  7655183225
drm-engine-capacity-vecs:       2
drm-cycles-ccs: 0
drm-total-cycles-ccs:   7655183225
drm-engine-capacity-ccs:        4
"""

# https://github.com/Syllo/nvtop/pull/492 (Radeon 890M, kernel 6.18, ollama llama-server): `grep drm-memory
# /proc/<pid>/fdinfo/7`; the "<- ..." notes the poster added are left off
AMDGPU_NVTOP = """drm-memory-cpu:         0 KiB
drm-memory-gtt:  25258000 KiB
drm-memory-vram:     5348 KiB
"""

# https://github.com/amd/xdna-driver/issues/324 (indented as pasted)
XDNA = """  drm-driver:    amdxdna_accel_driver
  drm-client-id:    76
  drm-pdev:    0000:c5:00.1
  drm-engine-npu-amdxdna:    0 ns
  drm-total-memory:    0
  drm-shared-memory:    0
  drm-active-memory:    0
"""


def test_units_bytes_kib_mib():
    r = fdinfo.parse(XE_DOC)
    assert r["drm-driver"] == "xe" and r["drm-pdev"] == "0000:03:00.0"
    assert r["drm-resident-vram0"] == 23992 * 1024
    assert r["drm-shared-vram0"] == 16 * 1024 * 1024
    assert r["drm-active-vram0"] == 0
    amd = fdinfo.parse(AMDGPU_NVTOP)
    assert amd["drm-memory-gtt"] == 25258000 * 1024 and amd["drm-memory-vram"] == 5348 * 1024
    assert fdinfo.parse(XDNA)["drm-engine-npu-amdxdna"] == 0


def test_summary_per_device_counts_a_client_once():
    xe = fdinfo.parse(XE_DOC)
    s = fdinfo.summarize([xe, dict(xe)])  # the same client on two fds
    assert s == {"0000:03:00.0": {"process_mem_bytes": 23992 * 1024, "process_gtt_bytes": 192 * 1024}}
    # cycles are not ns and capacities are not time: no engine time from xe's example
    assert "process_engine_ns" not in s["0000:03:00.0"]
    assert fdinfo.summarize([fdinfo.parse(AMDGPU_NVTOP)]) == {}  # no drm-driver line: not a DRM client record


def test_engine_time_in_ns():
    # https://github.com/torvalds/linux/commit/055634e4b62f109a47727c2c50586e2e318595a9 (i915 example; the commit
    # message runs the pairs on one line, the file has one pair per line)
    i915 = ("pos: 0\nflags: 0100002\nmnt_id: 21\ndrm-driver: i915\ndrm-pdev: 0000:00:02.0\ndrm-client-id: 7\n"
            "drm-engine-render: 9288864723 ns\ndrm-engine-copy: 2035071108 ns\ndrm-engine-video: 0 ns\n"
            "drm-engine-video-enhance: 0 ns\n")
    s = fdinfo.summarize([fdinfo.parse(i915), fdinfo.parse(XDNA)])
    assert s["0000:00:02.0"] == {"process_engine_ns": 9288864723 + 2035071108}
    assert s["0000:c5:00.1"] == {"process_engine_ns": 0}


def test_process_reader_over_a_proc_tree(tmp_path: Path):
    fd = tmp_path / "4242" / "fdinfo"
    fd.mkdir(parents=True)
    (fd / "0").write_text("\n".join(XE_DOC.splitlines()[:4]) + "\n")  # a plain file's fdinfo: no DRM keys
    (fd / "7").write_text(XE_DOC)
    (fd / "9").write_text(XE_DOC)  # the same client again
    assert fdinfo.devices_of(4242, tmp_path) == ["0000:03:00.0"]
    probe = fdinfo.FdinfoProbe(4242, "0000:03:00.0", proc_root=tmp_path, sys_root=tmp_path / "sys")
    assert probe.power_state() is None  # no sysfs here: unknown, treated as active
    assert probe.read() == {"process_mem_bytes": 23992 * 1024, "process_gtt_bytes": 192 * 1024}
    assert fdinfo.read_process(99999, tmp_path) == []
