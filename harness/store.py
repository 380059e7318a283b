"""Run directories: where observations land, as they are measured.

``results/<run_id>/``:
- ``manifest.json``: schema version, command, config, host, engine, models, cells,
  status (``running`` -> ``complete`` | ``interrupted`` | ``failed``), times.
  Rewritten atomically at each state change.
- ``samples.jsonl``: the journal, one JSON row per observation, appended and
  flushed as each is measured, so a killed run keeps everything measured so far.
- ``samples.parquet``: the same rows, written when the run ends.
- ``logs/``: server logs.
- swap runs add ``requests``, ``events`` and ``memory`` tables the same way.

A run whose process died without finishing still says ``running``; the manifest's ``process``
(pid, start time, host, boot id: ``harness/probes/run_process.py``) lets a reader on that machine
tell it is dead, and it reads as ``abandoned`` (``harness/record.py``).  Readers treat either as
incomplete and read the journal.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import sys
import tempfile
import threading
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol, TypeVar

import pandas as pd
import pyarrow as pa

from harness import __version__
from harness.atomic import atomic_write_json
from harness.errors import BadInput, WriteFailed
from harness.probes.run_process import this_process
from harness.record import SCHEMA_VERSION, RunRecord, read_record
from harness.schema import apply_schema, table_schema
from harness.untrusted import MAX_TABLE_BYTES, open_regular
from harness.runindex import iter_records, RunSummary
from harness.attest import sign_run

TABLES = ("samples",)


def new_run_id(kind: str, now: datetime | None = None) -> str:
    """Sortable: UTC time to the second, the kind, and a short random suffix."""
    now = now or datetime.now(timezone.utc)
    return f"{now:%Y%m%dT%H%M%SZ}-{kind}-{secrets.token_hex(2)}"


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


STARTED: list["RunWriter"] = []  # writers this process opened, oldest first (Ctrl-C names each run it touched)
FINISHED: list["RunWriter"] = []  # writers this process ended, newest last (Ctrl-C says what each kept)
RESERVE_BYTES = 256 * 1024  # kept free in the run directory so a full disk still gets the final manifest


class RunWriter:
    """Creates one run directory and appends observations to it.

    A write that fails (full disk, read-only or unwritable directory) stops the run cleanly:
    the journal is cut back to its last whole row (nothing journaled before is lost), later rows
    are dropped, the next append or manifest save in the main thread raises ``WriteFailed``
    (once; reader and sampler threads never raise), and ``finish`` frees a small reserve file
    so that the manifest can still say ``failed`` with the cause (docs/reliability.md)."""

    def __init__(self, results_root: Path, kind: str, manifest: dict):
        self.run_id = new_run_id(kind)
        self.dir = results_root / self.run_id
        self.write_error: str | None = None  # the first failed write, as said in the manifest
        self.signed = False  # set once the run's signature is written (harness/runs/session.py)
        self._told = False  # whether WriteFailed was raised for it
        self.dropped = 0  # rows not journaled after a failed write
        try:
            self.dir.mkdir(parents=True, exist_ok=False)
            (self.dir / "logs").mkdir()
        except OSError as exc:
            raise WriteFailed(f"cannot create the run directory ({exc.strerror or exc})", where=str(self.dir),
                              hint="free space, or make the results directory writable (or pick another with "
                                   "--results / LBENCH_RESULTS_DIR); nothing was written") from None
        self._reserve = self.dir / ".reserve"
        try:
            self._reserve.write_bytes(bytes(RESERVE_BYTES))
        except OSError:
            self._reserve.unlink(missing_ok=True)  # no room even for that: the run will find out soon
        self.manifest = {
            "schema_version": SCHEMA_VERSION,
            "lbench_version": __version__,
            "run_id": self.run_id,
            "kind": kind,
            "status": "running",
            "command": shlex.join(sys.argv),
            "argv": list(sys.argv),
            "started_at": utc_now(),
            "ended_at": None,
            "n_samples": 0,
            "process": this_process(),  # which process, host and boot wrote it: a killed run reads "abandoned"
            **manifest,
        }
        self._journals: dict[str, object] = {}
        self._sizes: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        self.sample_counts = {"measure": 0, "warmup": 0, "failed": 0}  # listings show these without the table
        self._lock = threading.Lock()  # samplers and event readers append from their own threads
        self.save_manifest()
        STARTED.append(self)

    # ---- failed writes ---------------------------------------------------
    def _failed(self, exc: OSError, what: str) -> None:
        if self.write_error is None:
            self.write_error = f"cannot write {what}: {exc.strerror or exc}"

    def _raise_once(self) -> None:
        """In the main thread, say once that writing failed; elsewhere (readers, samplers) never raise."""
        if self.write_error and not self._told and threading.current_thread() is threading.main_thread():
            self._told = True
            raise WriteFailed(f"the run stopped: {self.write_error}", where=str(self.dir),
                              hint="free space or make the results directory writable; every row journaled "
                                   "before the failure is kept (*.jsonl)")

    def save_manifest(self) -> None:
        try:
            atomic_write_json(self.dir / "manifest.json", manifest_json(self.manifest))
        except OSError as exc:
            self._failed(exc, "manifest.json")
        else:
            if self.signed:  # a section added after the run was signed (a swap run's findings): signed again
                try:
                    sign_run(self.dir)
                except Exception:  # noqa: BLE001 - the signature is stale then; history add says so
                    pass
        self._raise_once()

    def log_path(self, name: str) -> Path:
        return self.dir / "logs" / name

    def append(self, row: dict, table: str = "samples") -> None:
        line = (json.dumps({"run_id": self.run_id, **row}, default=str) + "\n").encode()
        with self._lock:
            if self.write_error is None:
                self._append_line(table, line, row.get("phase"), row.get("error") is not None)
            else:
                self.dropped += 1
        self._raise_once()

    def _append_line(self, table: str, line: bytes, phase: object = None, failed: bool = False) -> None:
        """One whole row or none: a partial write (a full disk) is cut off again."""
        fh = self._journals.get(table)
        try:
            if fh is None:
                if self.manifest.get("status") != "running":
                    return  # the run has ended; a late reader thread must not reopen it
                path = self.dir / f"{table}.jsonl"
                fh = open(path, "ab", buffering=0)  # unbuffered: each row is on disk at once
                self._journals[table] = fh
                self._sizes[table] = path.stat().st_size
            view = memoryview(line)
            while view:
                view = view[fh.write(view):]  # type: ignore[attr-defined]
        except OSError as exc:
            self._failed(exc, f"{table}.jsonl")
            self.dropped += 1
            if fh is not None:
                try:
                    os.ftruncate(fh.fileno(), self._sizes[table])  # type: ignore[attr-defined]
                except OSError:
                    pass
            return
        self._sizes[table] += len(line)
        self.counts[table] = self.counts.get(table, 0) + 1
        if table == "samples":
            if phase == "measure":
                self.sample_counts["failed" if failed else "measure"] += 1
            elif phase == "warmup":
                self.sample_counts["warmup"] += 1

    def finish(self, status: str, error: str | None = None) -> None:
        """End the run: Parquet copies of the journals, then the final manifest.  After a failed
        write the status is ``failed`` with the cause, the Parquet copies are skipped (readers use
        the journals) and the reserve makes room for the manifest.  Raises ``WriteFailed`` if
        the failure was not reported yet."""
        with self._lock:
            for fh in self._journals.values():
                try:
                    fh.close()  # type: ignore[attr-defined]
                except OSError:
                    pass
            self._journals.clear()
            self.manifest["status"] = status
            FINISHED.append(self)
        if self.write_error is None:
            for table in sorted(set(self.counts) | set(TABLES)):  # what was measured; derived columns: the analysis
                if not (self.dir / f"{table}.jsonl").exists():
                    continue
                out = self.dir / f"{table}.parquet"
                tmp = None
                try:
                    frame = apply_schema(read_journal(self.dir / f"{table}.jsonl"), table)
                    fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=self.dir)  # exclusive
                    tmp = Path(name)
                    with os.fdopen(fd, "wb") as fh:
                        frame.to_parquet(fh, index=False)
                    os.replace(tmp, out)
                except OSError as exc:
                    if tmp is not None:
                        tmp.unlink(missing_ok=True)
                    self._failed(exc, out.name)
                    break
                except Exception as exc:  # a value the schema cannot hold: the run ends failed, never 'running'
                    if tmp is not None:
                        tmp.unlink(missing_ok=True)
                    first = (str(exc).splitlines() or [""])[0][:200]
                    converted = (f"cannot convert {table}.jsonl to Parquet ({type(exc).__name__}: {first}); the "
                                 "journal keeps every row")
                    self.manifest["status"] = "failed"
                    error = converted if not error else f"{converted}; {error}"
                    continue
        self._reserve.unlink(missing_ok=True)
        self.manifest["ended_at"] = utc_now()
        self.manifest["n_samples"] = self.counts.get("samples", 0)
        self.manifest["rows"] = dict(self.counts)  # per table: samples, requests, events, memory, verdicts
        if self.counts.get("samples"):
            self.manifest["sample_counts"] = dict(self.sample_counts)  # measured (ok), warm-up, failed
        if self.write_error:
            self.manifest["status"] = "failed"
            self.manifest["write_error"] = self.write_error
            self.manifest["rows_dropped"] = self.dropped
            error = self.write_error if not error or self.write_error in error else f"{self.write_error}; {error}"
        if error:
            self.manifest["error"] = error
        try:
            atomic_write_json(self.dir / "manifest.json", manifest_json(self.manifest))
        except OSError as exc:
            self._failed(exc, "manifest.json")
        self._raise_once()


def manifest_json(manifest: dict) -> dict:
    """The manifest as JSON values: typed entries an executor fills in while the run goes
    (``as_manifest()``, e.g. an idle cell) become their objects."""
    return {k: ([v.as_manifest() if hasattr(v, "as_manifest") else v for v in value] if isinstance(value, list)
                else value.as_manifest() if hasattr(value, "as_manifest") else value)
            for k, value in manifest.items()}


def read_journal(path: Path) -> pd.DataFrame:
    """A journal's rows; a torn last line (a killed run) ends it.  The file is read as untrusted
    input: a regular file (not a FIFO or device) of bounded size, rows that are JSON objects."""
    fd, _ = open_regular(path, max_bytes=MAX_TABLE_BYTES, what=f"journal {path.name}")
    rows = []
    with open(fd, "rb") as fh:
        for raw in fh:
            line = raw.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except (ValueError, RecursionError):
                break  # a torn last line from a killed run
            if not isinstance(row, dict):
                raise BadInput(f"the journal {path.name} holds a row that is not an object", where=str(path),
                               hint="the run is damaged; run it again, or copy it again")
            rows.append(row)
    return pd.DataFrame(rows)


@dataclass
class Run:
    """A run directory and its record.  ``record`` is the typed manifest (harness/record.py);
    tables are read with their schema applied."""

    dir: Path
    record: RunRecord
    notes: list[str] = field(default_factory=list)  # how damaged files were read (also said on stderr)

    @property
    def run_id(self) -> str:
        return self.record.run_id

    @property
    def kind(self) -> str:
        return self.record.kind

    @property
    def complete(self) -> bool:
        return self.record.complete

    @property
    def summary(self) -> RunSummary:
        return RunSummary.of(self.record)

    def table(self, name: str = "samples") -> pd.DataFrame:
        """A table with its schema applied (harness/schema.py): known columns typed, missing ones added
        with their default, so runs written before a column existed read the same; a table the run
        never wrote is an empty frame with the known columns."""
        parquet = self.dir / f"{name}.parquet"
        journal = self.dir / f"{name}.jsonl"
        if parquet.exists() or parquet.is_symlink():
            try:
                fd, _ = open_regular(parquet, max_bytes=MAX_TABLE_BYTES, what=f"table {parquet.name}")
                with open(fd, "rb") as fh:
                    data = fh.read()  # bounded by open_regular
                # pyarrow reads a Python file object from its IO threads, which take the GIL: one still
                # at it when the interpreter exits aborts the process ("terminate called without an
                # active exception", seen under load; apache/arrow#34314). From a buffer, no thread of
                # Arrow's calls back into Python.
                return apply_schema(pd.read_parquet(pa.BufferReader(data)), name)
            except BadInput:
                raise
            except Exception as exc:  # truncated or damaged (pyarrow raises several kinds), or mistyped columns
                if not journal.exists():
                    raise BadInput(f"the run's {parquet.name} is damaged ({type(exc).__name__}: {exc}) and it "
                                   "has no journal to fall back on", where=str(parquet),
                                   hint="the run's data is lost; run it again") from None
                note = (f"note: {parquet.name} of run {self.run_id} is damaged ({type(exc).__name__}); "
                        f"read from the journal {journal.name} instead")
                if note not in self.notes:
                    self.notes.append(note)
                    print(note, file=sys.stderr)
        if journal.exists() or journal.is_symlink():
            frame = read_journal(journal)
        else:
            schema = table_schema(name)
            return schema.empty() if schema is not None else pd.DataFrame()
        try:
            return apply_schema(frame, name)
        except (ValueError, TypeError, OverflowError) as exc:  # e.g. a text latency_ms in a tampered journal
            raise BadInput(f"the run's {journal.name} has a column of the wrong type ({exc})", where=str(journal),
                           hint="the run is damaged; run it again, or copy it again") from None


LATEST = ("latest", "latest-any")
MAX_REF_CHARS = 200  # a run id is ~30 characters; longer refs are not names lbench wrote


def open_run(ref: str | Path, results_root: Path, *, kinds: Collection[str] | None = None) -> Run:
    """A run by directory path, by id, or by unique id prefix/suffix; 'latest' works too.

    ``kinds``: what 'latest' may pick (the kinds the command needs, e.g. compare after a calibrate
    run wants the newest idle run); None: any kind.  Ids and paths are taken as given."""

    if len(str(ref)) > MAX_REF_CHARS * 4 or "\0" in str(ref):
        raise BadInput(f"run reference is {len(str(ref))} characters long", where=str(ref)[:80] + "...",
                       hint="give a run id (lbench runs lists them), a run directory or 'latest'")
    candidate = Path(ref)
    try:
        is_run_dir = (candidate / "manifest.json").is_file()
    except OSError:  # ENAMETOOLONG and friends
        is_run_dir = False
    if not is_run_dir:
        if len(str(ref)) > MAX_REF_CHARS:
            raise BadInput(f"no run {str(ref)[:40]!r}... ({len(str(ref))} characters)", where=str(results_root),
                           hint="see `lbench runs` for the run ids")
        entries = list(iter_records(results_root, quiet=True))
        if str(ref) in LATEST and entries:
            candidate = latest_run(entries, any_status=str(ref) == "latest-any", where=results_root,
                                   kinds=kinds).dir
        else:
            matches = [e.dir for e in entries if e.dir.name.startswith(str(ref)) or e.dir.name.endswith(str(ref))]
            if len(matches) == 1:
                candidate = matches[0]
            elif len(matches) > 1:
                raise BadInput(f"run {ref!r} is ambiguous", where=str(results_root),
                               hint="candidates: " + ", ".join(m.name for m in matches))
            else:
                raise BadInput(f"no run {ref!r}", where=str(results_root),
                               hint="see `lbench runs` for the run ids")
    return Run(candidate, read_record(candidate / "manifest.json"))


class _Listed(Protocol):
    """A run as a listing holds it: a ``Run`` or a ``harness.runindex.IndexEntry``."""

    @property
    def dir(self) -> Path: ...
    @property
    def summary(self) -> RunSummary: ...


Listed = TypeVar("Listed", bound=_Listed)


def latest_run(runs: list[Listed], *, any_status: bool = False, where: Path | None = None,
               kinds: Collection[str] | None = None) -> Listed:
    """'latest' is the newest *complete* run: a failed, interrupted or still running one is never
    picked by accident (it is said on stderr); 'latest-any' (or the run's id) picks it anyway.
    With ``kinds``, only runs of those kinds count; newer runs of other kinds are named on stderr.
    ``runs``: oldest first, each with ``dir`` and ``summary`` (a ``Run`` or an index entry)."""
    every = runs
    if kinds is not None:
        runs = [r for r in runs if r.summary.kind in kinds]
        if not runs:
            raise BadInput(f"no {' or '.join(sorted(kinds))} run for 'latest'", where=str(where or "results"),
                           hint="run one first, or name a run by its id (lbench runs lists them)")
        other = every[every.index(runs[-1]) + 1:]
        if other:
            listed = ", ".join(f"{r.dir.name} ({r.summary.kind})" for r in other[-3:])
            print(f"note: 'latest' is the newest {' or '.join(sorted(kinds))} run; newer runs of another kind "
                  f"were passed over: {listed}", file=sys.stderr)
    if any_status:
        return runs[-1]
    complete = [r for r in runs if r.summary.complete]
    skipped = runs[runs.index(complete[-1]) + 1:] if complete else runs
    if not complete:
        newest = runs[-1]
        raise BadInput(f"no complete run for 'latest': the newest, {newest.dir.name}, is "
                       f"{newest.summary.status}", where=str(where or newest.dir.parent),
                       hint="name a run by its id, or say latest-any")
    if skipped:
        listed = ", ".join(f"{r.dir.name} ({r.summary.status})" for r in skipped[-3:])
        more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        print(f"note: 'latest' is {complete[-1].dir.name}, the newest complete run; skipped newer runs that did "
              f"not complete: {listed}{more} (name one by id, or say latest-any)", file=sys.stderr)
    return complete[-1]

