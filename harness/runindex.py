"""The index of runs: every run directory under a results root, as typed records, filtered.

``iter_records(root, kind=..., model=..., build=..., machine=..., status=..., since=...)`` reads
each ``<root>/<run id>/manifest.json`` as untrusted input (harness/untrusted.py) and yields an
``IndexEntry`` (its directory and ``RunRecord``), oldest first.  A run that cannot be read is
skipped with a one-line reason (said on stderr unless ``quiet``, and collected in ``skipped``),
so one damaged run never breaks a listing.

What a listing shows beyond the manifest (measured / warm-up / failed sample counts, which
would otherwise mean reading every run's table) is kept in ``<root>/.lbench-index.json``,
keyed by each file's size and modification time: a finished run is read once.  The cache is
only an accelerator: deleting it loses nothing, and a damaged one is ignored.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.errors import BadInput
from harness.record import RunRecord, read_record

INDEX_FILE = ".lbench-index.json"
INDEX_VERSION = 1


@dataclass(frozen=True)
class IndexEntry:
    dir: Path
    record: RunRecord

    @property
    def run_id(self) -> str:
        return self.record.run_id


@dataclass(frozen=True)
class Skipped:
    dir: Path
    reason: str

    def line(self) -> str:
        return f"skipped {self.dir.name}: {self.reason}"


def _order(entry: IndexEntry) -> tuple[str, str, str]:
    # by the id's second, then the manifest's start (ms): two runs started in the same second have
    # random suffixes that do not sort by time
    return entry.dir.name[:16], entry.record.started_at or "", entry.dir.name


def iter_records(root: Path, *, kind: str | tuple[str, ...] | None = None, model: str | None = None,
                 setting: str | None = None, build: int | None = None, machine: str | None = None,
                 status: str | None = None, since: str | None = None, until: str | None = None,
                 quiet: bool = False, skipped: list[Skipped] | None = None) -> Iterator[IndexEntry]:
    """The runs under ``root``, oldest first, that match every filter given:
    ``kind`` (one or several), ``model`` (a model label), ``setting`` (a cell's setting label),
    ``build`` (engine build number), ``machine`` (fingerprint id, hostname, or a part of the
    machine's label), ``status``, ``since``/``until`` (a run-id prefix or ISO time, compared as text)."""
    root = Path(root)
    if not root.is_dir():
        return
    kinds = (kind,) if isinstance(kind, str) else kind
    entries: list[IndexEntry] = []
    try:
        children = sorted(root.iterdir())
    except OSError as exc:
        raise BadInput(f"cannot list the results directory ({exc.strerror or exc})", where=str(root),
                       hint="make it readable, or point --results elsewhere") from None
    for d in children:
        if d.name.startswith(".") or not d.is_dir():
            continue
        manifest = d / "manifest.json"
        if not (manifest.exists() or manifest.is_symlink()):
            continue  # not a run directory (a baselines folder, a user's notes)
        try:
            record = read_record(manifest)
        except BadInput as exc:
            note = Skipped(d, exc.what)
            if skipped is not None:
                skipped.append(note)
            if not quiet:
                print(f"note: {note.line()}", file=sys.stderr)
            continue
        entries.append(IndexEntry(d, record))
    for entry in sorted(entries, key=_order):
        r = entry.record
        if kinds and r.kind not in kinds:
            continue
        if status and r.status != status:
            continue
        if model and model not in r.model_labels:
            continue
        if setting and setting not in r.settings:
            continue
        if build is not None and r.engine.build_number != build:
            continue
        if machine and machine not in (r.machine.id, r.host.hostname) and machine not in r.machine.label:
            continue
        stamp = r.started_at or entry.dir.name
        if since and max(stamp, entry.dir.name) < since:
            continue
        if until and min(stamp, entry.dir.name) > until:
            continue
        yield entry


# ---- what a listing shows: counts cached by file identity -------------------------------------

def _stat_key(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino]


class ListingCache:
    """Sample counts per run, kept in ``<root>/.lbench-index.json`` (best effort)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.path = self.root / INDEX_FILE
        self.entries: dict[str, dict] = {}
        self.changed = False
        try:
            from harness.untrusted import read_json

            data = read_json(self.path, what="run index")
            if isinstance(data, dict) and data.get("version") == INDEX_VERSION and isinstance(data.get("runs"), dict):
                self.entries = {k: v for k, v in data["runs"].items() if isinstance(v, dict)}
        except (BadInput, OSError):
            pass  # missing or damaged: rebuilt

    def counts(self, entry: IndexEntry, table: str, compute) -> dict:
        """``compute(entry)`` -> a dict of counts, cached while the run's files keep size and time."""
        key = [_stat_key(entry.dir / "manifest.json"), _stat_key(entry.dir / f"{table}.parquet"),
               _stat_key(entry.dir / f"{table}.jsonl")]
        cached = self.entries.get(entry.dir.name)
        if cached is not None and cached.get("key") == key and cached.get("table") == table \
                and isinstance(cached.get("counts"), dict):
            return cached["counts"]
        counts = compute(entry)
        if entry.record.status != "running":  # a running run's counts change: not kept
            self.entries[entry.dir.name] = {"key": key, "table": table, "counts": counts}
            self.changed = True
        return counts

    def save(self, keep: set[str]) -> None:
        if not self.changed:
            return
        data = {"version": INDEX_VERSION, "runs": {k: v for k, v in self.entries.items() if k in keep}}
        tmp = self.path.with_name(f"{INDEX_FILE}.{os.getpid()}.tmp")
        try:
            with open(tmp, "x") as fh:  # exclusive: never follows a planted file
                json.dump(data, fh)
            os.replace(tmp, self.path)
        except OSError:  # a read-only results folder still lists
            try:
                tmp.unlink()
            except OSError:
                pass
