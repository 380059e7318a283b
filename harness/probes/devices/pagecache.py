"""The model file's share in the page cache (Linux), as a device probe sampled in the pause.

``mincore(2)`` over a read-only map of the file kept for the cell (``harness.probes.pagecache``):
no data is read, no server or device is touched.  It was read just before and just after every timed
request until it became a pause probe (docs/mac.md, audit finding 15); now it is read only in
the pause, stopping a guard interval before the request, like every other device probe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.probes import pagecache


@dataclass
class PageCacheProbe:
    path: Path
    name: str = "pagecache"
    device: str = "page-cache"
    # one mapping for the cell, only mincore per reading (pagecache.ResidencyProbe: mapping per reading made
    # one-tick stalls more frequent); made on the first reading, in the pause
    _residency: pagecache.ResidencyProbe | None = field(default=None, repr=False)

    def power_state(self) -> str | None:
        return None

    def read(self) -> dict[str, object]:
        if not pagecache.available():
            return {}
        if self._residency is None:
            self._residency = pagecache.ResidencyProbe(self.path)
        fraction = self._residency()
        return {} if fraction is None else {"file_resident_pct": round(100.0 * fraction, 3)}


def status() -> str:
    return ("available (mincore over a map of the model file: its share in the page cache)" if pagecache.available()
            else "not available: needs Linux mincore")
