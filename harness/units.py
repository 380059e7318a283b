"""Numbers as a person reads them: sizes in the unit that shows them, latencies to three figures."""

from __future__ import annotations


def size_text(n_bytes: float | None) -> str:
    """A file size in the unit that shows it: 8.53 GB, 412 MB, 96.3 KB (never "0.000 GB")."""
    if n_bytes is None or n_bytes != n_bytes:
        return "–"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n_bytes) >= scale:
            value = n_bytes / scale
            return f"{value:,.3g} {unit}" if value < 100 else f"{value:,.0f} {unit}"
    return f"{int(n_bytes)} B"


def ms(value: float | None) -> str:
    """A latency to about three significant figures: 118, 13.6, 1.23, 0.412 (no unit)."""
    if value is None or value != value:
        return "–"
    a = abs(value)
    return f"{value:.0f}" if a >= 100 else f"{value:.1f}" if a >= 10 else f"{value:.2f}" if a >= 1 else f"{value:.3f}"


DURATION_UNITS = {"s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """``"15m"`` -> 900.0, ``"90s"``/``"90"`` -> 90.0, ``"1h"`` -> 3600.0; ValueError on anything else."""
    t = text.strip().lower()
    for unit in sorted(DURATION_UNITS, key=len, reverse=True):
        if t.endswith(unit):
            t, factor = t[: -len(unit)].strip(), DURATION_UNITS[unit]
            break
    else:
        factor = 1.0
    value = float(t) * factor
    if not (value == value and value not in (float("inf"), float("-inf"))):
        raise ValueError(f"not a duration: {text!r}")
    return value
