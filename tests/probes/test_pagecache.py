import os
from pathlib import Path

import pytest

from harness.probes import pagecache

pytestmark = pytest.mark.skipif(not pagecache.available(), reason="needs Linux mincore/posix_fadvise")


@pytest.fixture
def disk_file(tmp_path):
    path = tmp_path / "blob.bin"
    path.write_bytes(os.urandom(8 << 20))
    os.sync()
    return path


def test_evict_then_warm(disk_file: Path):
    pagecache.evict(disk_file)
    cold = pagecache.resident_fraction(disk_file)
    if cold is not None and cold > 0.5:
        pytest.skip("this filesystem keeps pages (tmpfs?): eviction cannot be shown here")
    assert cold < 0.05
    pagecache.warm(disk_file)
    assert pagecache.resident_fraction(disk_file) == 1.0


def test_empty_file(tmp_path):
    f = tmp_path / "empty"
    f.write_bytes(b"")
    assert pagecache.resident_fraction(f) == 1.0
