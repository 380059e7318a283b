"""What the last gate against the history had: ``<archive>/.gate-state.json``.

For each gated series (series, machine, model, setting) the catalog time of the newest run the
archive held when that gate chose its baseline.  The next gate reads it as ``since``: a baseline
made only of runs cataloged after it (runs no earlier gate had) does not replace the runs it had
(``harness/history/gate_hook.py``).  An archive that cannot be written keeps no state (said once);
a missing or damaged state file means "no gate yet" (the first gate takes its window as found).
"""

from __future__ import annotations

import sys
from pathlib import Path

STATE_FILE = ".gate-state.json"
MAX_ENTRIES = 100_000


def state_key(series: str, machine: str | None, model: str | None, setting: str | None) -> str:
    return "|".join([series, machine or "*", model or "*", setting or "*"])


def _read(archive: Path) -> dict[str, str]:
    from harness.errors import BadInput
    from harness.untrusted import read_json

    path = Path(archive) / STATE_FILE
    if not path.is_file():
        return {}
    try:
        doc = read_json(path, what="archive's gate state", max_bytes=64 * 1024 * 1024, max_depth=3)
    except BadInput:
        return {}
    if not isinstance(doc, dict) or len(doc) > MAX_ENTRIES:
        return {}
    return {str(k): v for k, v in doc.items() if isinstance(v, str)}


def last_gate(archive: Path, key: str) -> str | None:
    return _read(archive).get(key)


def record_gate(archive: Path, key: str, seen_until: str | None) -> None:
    from harness.atomic import atomic_write_json

    if not seen_until:
        return
    state = _read(archive)
    if state.get(key, "") >= seen_until:
        return
    state[key] = seen_until
    try:
        atomic_write_json(Path(archive) / STATE_FILE, state)
    except OSError as exc:
        print(f"note: the gate state could not be saved in the archive ({exc.strerror or exc})", file=sys.stderr)
