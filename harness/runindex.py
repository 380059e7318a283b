"""The index of runs: every run directory under a results root, summarised, filtered, oldest first.

``iter_records(root, kind=..., model=..., build=..., machine=..., status=..., since=...)`` yields an
``IndexEntry`` per readable run: its directory, a ``RunSummary`` (what listings and filters use)
and, on demand, its full ``RunRecord`` (``entry.record``, read then).  A run that cannot be read
is skipped with a one-line reason (said on stderr unless ``quiet``, and collected in
``skipped``), so one damaged run never breaks a listing.

Summaries are kept in ``<root>/.lbench-index.json``, keyed by each manifest's size, modification
time and inode: a listing of thousands of runs reads one small file and stats each manifest; a
run whose manifest changed is read again.  The cache is only an accelerator (deleting it loses
nothing; a damaged or tampered one is ignored entry by entry), and opening a run by id always reads
and validates its manifest.  Sample counts for ``lbench runs`` are cached the same way.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from harness.errors import BadInput
from harness.record import RunRecord, read_record
from harness.untrusted import read_json

INDEX_FILE = ".lbench-index.json"
INDEX_VERSION = 3  # 3: row counts per table in the summary


@dataclass(frozen=True)
class RunSummary:
    """What a listing shows and filters on, from the run's record."""

    run_id: str
    kind: str
    status: str
    started_at: str | None
    duration_s: float | None
    models: tuple[str, ...]
    settings: tuple[str, ...]
    engine_build: int | None
    machine_id: str
    machine_label: str
    hostname: str | None
    sample_counts: dict[str, int] | None  # measured (ok), warmup, failed, as the writer counted them
    rows: dict[str, int]  # rows per table, as the manifest says (a listing reads no table for them)

    @classmethod
    def of(cls, r: RunRecord) -> RunSummary:
        counts = r.section("sample_counts")
        ok = set(counts) == {"measure", "warmup", "failed"} and all(
            isinstance(v, int) and not isinstance(v, bool) for v in counts.values())
        return cls(run_id=r.run_id, kind=r.kind, status=r.status, started_at=r.started_at, duration_s=r.duration_s,
                   models=r.model_labels, settings=r.settings, engine_build=r.engine.build_number,
                   machine_id=r.machine.id, machine_label=r.machine.label, hostname=r.host.hostname,
                   sample_counts=dict(counts) if ok else None, rows=dict(r.rows))

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    @classmethod
    def from_json(cls, data: object) -> RunSummary | None:
        """A cached summary, or None when it is not one this lbench wrote (then the manifest is read)."""
        if not isinstance(data, dict) or set(data) != {f.name for f in fields(cls)}:
            return None
        text = ("run_id", "kind", "status", "machine_id", "machine_label")
        if not all(isinstance(data[k], str) for k in text):
            return None
        if not all(isinstance(data[k], list) and all(isinstance(v, str) for v in data[k]) for k in ("models", "settings")):
            return None
        if not all(data[k] is None or isinstance(data[k], str) for k in ("started_at", "hostname")):
            return None
        if not (data["duration_s"] is None or isinstance(data["duration_s"], (int, float))):
            return None
        rows = data["rows"]
        if not (isinstance(rows, dict) and all(isinstance(k, str) and isinstance(v, int) for k, v in rows.items())):
            return None
        counts = data["sample_counts"]
        if counts is not None and not (isinstance(counts, dict) and set(counts) == {"measure", "warmup", "failed"}
                                       and all(isinstance(v, int) for v in counts.values())):
            return None
        if not (data["engine_build"] is None or (isinstance(data["engine_build"], int)
                                                 and not isinstance(data["engine_build"], bool))):
            return None
        return cls(**{**data, "models": tuple(data["models"]), "settings": tuple(data["settings"])})


@dataclass
class IndexEntry:
    dir: Path
    summary: RunSummary
    _record: RunRecord | None = field(default=None, repr=False)

    @property
    def run_id(self) -> str:
        return self.summary.run_id

    @property
    def record(self) -> RunRecord:
        """The full record, read (and validated) on first use."""
        if self._record is None:
            self._record = read_record(self.dir / "manifest.json")
        return self._record


@dataclass(frozen=True)
class Skipped:
    dir: Path
    reason: str

    def line(self) -> str:
        return f"skipped {self.dir.name}: {self.reason}"


def _stat_key(path: Path) -> list[int] | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino]


class IndexCache:
    """``<root>/.lbench-index.json``: per run directory, the manifest's identity, its summary and
    any counts a listing computed (best effort: a read-only results folder is listed uncached)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.path = self.root / INDEX_FILE
        self.entries: dict[str, dict] = {}
        self.seen: set[str] | None = None  # the run directories the last scan found
        self.changed = False
        try:
            data = read_json(self.path, what="run index")
            if isinstance(data, dict) and data.get("version") == INDEX_VERSION and isinstance(data.get("runs"), dict):
                self.entries = {k: v for k, v in data["runs"].items() if isinstance(v, dict)}
        except (BadInput, OSError):
            pass  # missing or damaged: rebuilt

    def summary(self, d: Path, key: list[int] | None) -> RunSummary | None:
        cached = self.entries.get(d.name)
        if cached is None or key is None or cached.get("key") != key:
            return None
        return RunSummary.from_json(cached.get("summary"))

    def put_summary(self, d: Path, key: list[int] | None, summary: RunSummary) -> None:
        if key is None or summary.status in ("running", "abandoned"):  # judged again on each read: not kept
            return
        self.entries[d.name] = {"key": key, "summary": asdict(summary)}
        self.changed = True

    def counts(self, entry: IndexEntry, table: str, compute: Callable[[IndexEntry], dict]) -> dict:
        """``compute(entry)`` -> a dict of counts, cached while the run's files keep size and time."""
        key = [_stat_key(entry.dir / "manifest.json"), _stat_key(entry.dir / f"{table}.parquet"),
               _stat_key(entry.dir / f"{table}.jsonl")]
        cached = self.entries.get(entry.dir.name, {}).get("counts")
        if isinstance(cached, dict) and cached.get("key") == key and cached.get("table") == table \
                and isinstance(cached.get("counts"), dict):
            return cached["counts"]
        counts = compute(entry)
        if entry.summary.status not in ("running", "abandoned") and entry.dir.name in self.entries:
            self.entries[entry.dir.name]["counts"] = {"key": key, "table": table, "counts": counts}
            self.changed = True
        return counts

    def save(self, keep: set[str] | None = None) -> None:
        if not self.changed:
            return
        runs = {k: v for k, v in self.entries.items() if keep is None or k in keep}
        tmp = self.path.with_name(f"{INDEX_FILE}.{os.getpid()}.tmp")
        try:
            with open(tmp, "x") as fh:  # exclusive: never follows a planted file
                json.dump({"version": INDEX_VERSION, "runs": runs}, fh)
            os.replace(tmp, self.path)
            self.changed = False
        except OSError:
            try:
                tmp.unlink()
            except OSError:
                pass


def _order(entry: IndexEntry) -> tuple[str, str, str]:
    # by the id's second, then the manifest's start (ms): two runs started in the same second have
    # random suffixes that do not sort by time
    return entry.dir.name[:16], entry.summary.started_at or "", entry.dir.name


def scan(root: Path, *, quiet: bool = False, skipped: list[Skipped] | None = None,
         cache: IndexCache | None = None) -> list[IndexEntry]:
    """Every readable run directory under ``root``, oldest first (the cache is read and updated)."""
    root = Path(root)
    if not root.is_dir():
        return []
    own_cache = cache is None
    cache = cache if cache is not None else IndexCache(root)
    try:
        children = sorted(root.iterdir())
    except OSError as exc:
        raise BadInput(f"cannot list the results directory ({exc.strerror or exc})", where=str(root),
                       hint="make it readable, or point --results elsewhere") from None
    entries: list[IndexEntry] = []
    seen: set[str] = set()
    for d in children:
        if d.name.startswith("."):
            continue
        manifest = d / "manifest.json"
        key = _stat_key(manifest)
        if key is None:
            continue  # not a run directory (a baselines folder, a user's notes)
        seen.add(d.name)
        summary = cache.summary(d, key)
        if summary is not None:
            entries.append(IndexEntry(d, summary))
            continue
        try:
            record = read_record(manifest)
        except BadInput as exc:
            note = Skipped(d, exc.what)
            if skipped is not None:
                skipped.append(note)
            if not quiet:
                print(f"note: {note.line()}", file=sys.stderr)
            continue
        summary = RunSummary.of(record)
        cache.put_summary(d, key, summary)
        entries.append(IndexEntry(d, summary, record))
    cache.seen = seen
    if own_cache:
        cache.save(seen)
    return sorted(entries, key=_order)


def matches(s: RunSummary, *, kinds: tuple[str, ...] | None = None, model: str | None = None,
            setting: str | None = None, build: int | None = None, machine: str | None = None,
            status: str | None = None, since: str | None = None, until: str | None = None) -> bool:
    if kinds and s.kind not in kinds:
        return False
    if status and s.status != status:
        return False
    if model and model not in s.models:
        return False
    if setting and setting not in s.settings:
        return False
    if build is not None and s.engine_build != build:
        return False
    if machine and machine not in (s.machine_id, s.hostname) and machine not in s.machine_label:
        return False
    stamp = s.started_at or s.run_id
    if since and max(stamp, s.run_id) < since:
        return False
    if until and min(stamp, s.run_id) > until:
        return False
    return True


def iter_records(root: Path, *, kind: str | tuple[str, ...] | None = None, model: str | None = None,
                 setting: str | None = None, build: int | None = None, machine: str | None = None,
                 status: str | None = None, since: str | None = None, until: str | None = None,
                 quiet: bool = False, skipped: list[Skipped] | None = None,
                 cache: IndexCache | None = None) -> Iterator[IndexEntry]:
    """The runs under ``root``, oldest first, that match every filter given:
    ``kind`` (one or several), ``model`` (a model label), ``setting`` (a cell's setting label),
    ``build`` (engine build number), ``machine`` (fingerprint id, hostname, or a part of the
    machine's label), ``status``, ``since``/``until`` (a run-id prefix or ISO time, compared as text)."""
    kinds = (kind,) if isinstance(kind, str) else kind
    filters: dict[str, Any] = dict(kinds=kinds, model=model, setting=setting, build=build, machine=machine,
                                   status=status, since=since, until=until)
    for entry in scan(root, quiet=quiet, skipped=skipped, cache=cache):
        if matches(entry.summary, **filters):
            yield entry
