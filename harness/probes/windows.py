"""GPU memory on Windows from the PDH counters, read with ``typeperf`` (no extra package, no elevation).

Counters (WDDM, Windows 10 1709+): ``\\GPU Adapter Memory(*)\\Dedicated Usage`` / ``Shared Usage``
(per adapter, instance ``luid_0x..._0x..._phys_0``) and ``\\GPU Process Memory(*)\\Dedicated Usage`` /
``Shared Usage`` (per process and adapter, instance ``pid_<pid>_luid_..._phys_0``), in bytes.
``typeperf -sc 1 COUNTER...`` prints one CSV header (``"(PDH-CSV 4.0)"`` then ``\\\\HOST\\Object(instance)\\Counter``
per column), one row per sample, then status lines in the machine's language.

The parser is tested on a real adapter capture (tests/fixtures/windows/); no real capture of the
process counters was found, so the per-process sums are untested, and nothing here has run on
Windows (docs/windows.md).  Counter names may be localized on some Windows installations:
``read_gpu_memory`` then finds no column and says "not available" (None), never 0.
"""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys

ADAPTER_COUNTERS = [r"\GPU Adapter Memory(*)\Dedicated Usage", r"\GPU Adapter Memory(*)\Shared Usage"]
PROCESS_COUNTERS = [r"\GPU Process Memory(*)\Dedicated Usage", r"\GPU Process Memory(*)\Shared Usage"]
_PATH = re.compile(r"^(?:\\\\[^\\]+)?\\(?P<object>[^\\(]+)\((?P<instance>[^)]*)\)\\(?P<counter>.+)$")
_COLUMN = {"Dedicated Usage": "dedicated_bytes", "Shared Usage": "shared_bytes"}


def split_path(path: str) -> tuple[str, str, str] | None:
    """``\\\\HOST\\GPU Adapter Memory(luid_..)\\Dedicated Usage`` -> (object, instance, counter)."""
    m = _PATH.match(path.strip())
    return (m.group("object"), m.group("instance"), m.group("counter")) if m else None


def parse_typeperf(text: str) -> list[dict[tuple[str, str, str], float]]:
    """typeperf CSV -> one dict per sample: (object, instance, counter) -> value.  Lines that are not
    CSV rows of the header's width (status lines, blanks) are skipped; an empty cell (a counter with no
    value in that sample) is left out."""
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    header_at = next((i for i, r in enumerate(rows) if r[0].startswith("(PDH-CSV")), None)
    if header_at is None:
        return []
    paths = [split_path(p) for p in rows[header_at][1:]]
    samples = []
    for row in rows[header_at + 1:]:
        if len(row) != len(paths) + 1:
            continue
        sample: dict[tuple[str, str, str], float] = {}
        for path, cell in zip(paths, row[1:]):
            try:
                value = float(cell)
            except ValueError:
                continue
            if path is not None:
                sample[path] = value
        samples.append(sample)
    return samples


def adapter_memory(sample: dict[tuple[str, str, str], float]) -> dict[str, dict[str, int]]:
    """Per adapter instance: dedicated_bytes / shared_bytes (those present)."""
    out: dict[str, dict[str, int]] = {}
    for (obj, instance, counter), value in sample.items():
        if obj == "GPU Adapter Memory" and counter in _COLUMN:
            out.setdefault(instance, {})[_COLUMN[counter]] = int(value)
    return out


def process_memory(sample: dict[tuple[str, str, str], float], pid: int) -> dict[str, int]:
    """One process's GPU memory summed over adapters (instances ``pid_<pid>_luid_...``); {} when absent."""
    out: dict[str, int] = {}
    prefix = f"pid_{pid}_"
    for (obj, instance, counter), value in sample.items():
        if obj == "GPU Process Memory" and instance.startswith(prefix) and counter in _COLUMN:
            out[_COLUMN[counter]] = out.get(_COLUMN[counter], 0) + int(value)
    return out


def read_gpu_memory(pid: int | None = None, timeout_s: float = 10.0) -> dict | None:
    """One typeperf sample (Windows only; None elsewhere or when the counters are not there): the busiest
    adapter's dedicated/shared bytes and, with ``pid``, that process's.  typeperf takes about a second:
    read before and after a run, never inside a timed pause."""
    if sys.platform != "win32":
        return None
    counters = ADAPTER_COUNTERS + (PROCESS_COUNTERS if pid is not None else [])
    try:
        out = subprocess.run(["typeperf", "-sc", "1", *counters], capture_output=True, text=True,
                             timeout=timeout_s).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    samples = parse_typeperf(out)
    if not samples:
        return None
    adapters = adapter_memory(samples[-1])
    if not adapters:
        return None
    busiest = max(adapters, key=lambda k: adapters[k].get("dedicated_bytes", 0))
    result: dict = {"adapter": busiest, **{f"adapter_{k}": v for k, v in adapters[busiest].items()}}
    if pid is not None:
        result.update({f"process_{k}": v for k, v in process_memory(samples[-1], pid).items()})
    return result
