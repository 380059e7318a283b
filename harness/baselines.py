"""Saved baselines, keyed by machine fingerprint.

``lbench baseline save RUN --name main`` copies the run into
``<results>/.baselines/<name>/`` (beside the runs, so ``--results`` and
``$LBENCH_RESULTS_DIR`` move baselines with them) with ``baseline.json`` (name, run
id, fingerprint, time).  Baselines saved by older lbench versions in
``<cache>/baselines/`` are still found there (read only).  The fingerprint is what
makes numbers comparable: chip, OS release, engine build and binary hash.  Comparing
against a baseline from another fingerprint is allowed but warned about; comparing a
run with itself is refused (``refuse_same_runs``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import sys
import time
from collections.abc import Collection
from pathlib import Path

from harness import paths
from harness.atomic import atomic_dir, atomic_write_json, locked
from harness.errors import BadInput
from harness.record import RunRecord
from harness.store import Run, open_run
from harness.untrusted import read_json

PREFIX = "baseline:"


def fingerprint(record: RunRecord) -> dict:
    """What baseline.json says the baseline was measured on: the machine and the engine."""
    host, engine = record.host, record.engine
    fp = {"chip": host.cpu_model, "machine": host.machine, "os": host.os, "os_release": host.os_release,
          "engine_build": engine.build_number, "engine_sha256": (engine.sha256 or "")[:16],
          "virtual": host.virtual, "machine_id": record.machine.id}
    fp["id"] = hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()[:12]
    return fp


def differences(a: dict, b: dict) -> list[str]:
    return [f"{k}: {a.get(k)!r} vs {b.get(k)!r}" for k in sorted((set(a) | set(b)) - {"id"}) if a.get(k) != b.get(k)]


BASELINES_DIR = ".baselines"  # inside the results directory


def root(results_root: Path | None = None) -> Path:
    """Where baselines are saved: ``<results>/.baselines``."""
    return (results_root if results_root is not None else paths.results_dir()) / BASELINES_DIR


def old_root() -> Path:
    """Where lbench before 0.x kept them (read only): ``<cache>/baselines``."""
    return paths.cache_dir() / "baselines"


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
MAX_COPY_BYTES = 8 << 30  # a run directory is megabytes; this much is not a run


def check_name(name: object) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise BadInput(f"bad baseline name {str(name)[:120]!r}", where="--name",
                       hint="1-100 letters, digits, '.', '-' and '_', starting with a letter or digit")
    return name


MAX_DEPTH = 16


def copy_regular(src: Path, dst: Path, notes: list[str], budget: list[int], depth: int = 0) -> None:
    """Copy the run directory ``src`` to ``dst``: directories and regular files only, never
    through a link (a ``logs/zero -> /dev/zero`` or ``loop -> ..`` inside a run is skipped
    with a note, as are FIFOs, sockets and devices).  Each file is opened with O_NOFOLLOW and
    checked with fstat, so a file swapped for a link while copying is skipped too."""
    dst.mkdir()
    with os.scandir(src) as it:
        entries = sorted(it, key=lambda e: e.name)
    for e in entries:
        where = f"{src.name}/{e.name}"
        if e.is_symlink():
            notes.append(f"skipped {where}: a symbolic link")
        elif e.is_dir(follow_symlinks=False):
            if depth >= MAX_DEPTH:
                notes.append(f"skipped {where}: folders nested deeper than {MAX_DEPTH}")
                continue
            copy_regular(Path(e.path), dst / e.name, notes, budget, depth + 1)
        elif e.is_file(follow_symlinks=False):
            try:
                fd = os.open(e.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
            except OSError as exc:
                notes.append(f"skipped {where}: {exc.strerror}")
                continue
            with os.fdopen(fd, "rb") as fin:
                st = os.fstat(fin.fileno())
                if not stat.S_ISREG(st.st_mode):
                    notes.append(f"skipped {where}: not a regular file")
                    continue
                budget[0] -= st.st_size
                if budget[0] < 0:
                    raise BadInput(f"the run directory holds more than {MAX_COPY_BYTES >> 30} GiB", where=str(src),
                                   hint="a run directory is megabytes; check what was put into it")
                with open(dst / e.name, "xb") as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)
            os.utime(dst / e.name, ns=(st.st_atime_ns, st.st_mtime_ns))
        else:
            notes.append(f"skipped {where}: not a regular file (FIFO, socket or device)")


def _roots(results_root: Path | None) -> list[Path]:
    return [root(results_root), old_root()]


def save(run: Run, name: str, results_root: Path | None = None, notes: list[str] | None = None) -> Path:
    """Copy the run into ``<results>/.baselines/<name>/`` (regular files only, see ``copy_regular``):
    built in a temporary directory and swapped in whole, under a lock, so concurrent saves of
    one name never share a temporary directory and a reader sees the old baseline or the new."""
    notes = notes if notes is not None else []
    base = root(results_root)
    dest = base / check_name(name)
    base.mkdir(parents=True, exist_ok=True)
    with locked(base / f".{name}.lock"), atomic_dir(dest) as tmp:
        copy_regular(run.dir, tmp / run.dir.name, notes, [MAX_COPY_BYTES])
        atomic_write_json(tmp / "baseline.json", {"name": name, "run_id": run.dir.name, "saved_at":
                                                  time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                                  "fingerprint": fingerprint(run.record)})
    return dest


def list_baselines(results_root: Path | None = None) -> list[dict]:
    """Saved baselines, those beside the results first; one of the same name in the old cache
    location is listed only when there is none beside the results (``old_location``: True)."""
    out, seen = [], set()
    for base in _roots(results_root):
        for d in sorted(base.glob("*/baseline.json")) if base.is_dir() else []:
            try:
                info = read_json(d, what="baseline.json")
            except BadInput as exc:  # damaged: said, skipped
                print(f"note: skipped baseline {d.parent.name}: {exc.what}", file=sys.stderr)
                continue
            if not isinstance(info, dict) or not isinstance(info.get("name"), str) \
                    or not isinstance(info.get("run_id"), str) or not isinstance(info.get("fingerprint", {}), dict):
                print(f"note: skipped baseline {d.parent.name}: its baseline.json is not one lbench wrote",
                      file=sys.stderr)
                continue
            if info.get("name") in seen:
                continue
            seen.add(info.get("name"))
            out.append({**info, "dir": str(d.parent), "old_location": base == old_root()})
    return out


def _saved_name(name: object) -> str:
    """A name to look a saved baseline up by: one folder name under the baselines, never a path
    (``baseline:../../x``); looser than ``check_name``, so baselines saved before it still load."""
    if not isinstance(name, str) or not name or "/" in name or "\0" in name or name.startswith(".") \
            or len(name.encode(errors="replace")) > 255:
        raise BadInput(f"bad baseline name {str(name)[:120]!r}", where="baseline:NAME",
                       hint="the name given to `lbench baseline save --name` (lbench baseline show lists them)")
    return name


def load(name: str, results_root: Path | None = None) -> Run:
    for base in _roots(results_root):
        meta = base / _saved_name(name) / "baseline.json"
        if meta.is_file():
            info = read_json(meta, what="baseline.json")
            run_id = info.get("run_id") if isinstance(info, dict) else None
            if not isinstance(run_id, str) or not run_id or "/" in run_id or run_id.startswith("."):
                raise BadInput("the baseline's baseline.json names no run directory of its own", where=str(meta),
                               hint="save the baseline again: lbench baseline save RUN --name NAME")
            return open_run(meta.parent / run_id, meta.parent)
    known = ", ".join(b["name"] for b in list_baselines(results_root)) or "none saved"
    raise BadInput(f"no baseline named {name!r}", where=f"{root(results_root)} (and {old_root()})",
                   hint=f"known: {known}; save one with `lbench baseline save RUN --name NAME`")


def refuse_same_runs(baseline: list[Run], candidate: list[Run]) -> None:
    """Exit 2 when a run stands on both sides (e.g. ``baseline:main`` saved from the run that
    ``latest`` picks): a verdict on a run against itself says nothing."""
    both = sorted({r.run_id for r in baseline} & {r.run_id for r in candidate})
    if both:
        raise BadInput(f"baseline and candidate both hold run {', '.join(both)}: a run compared with itself "
                       "says nothing", where="--baseline / --candidate",
                       hint="give the candidate's run id (lbench runs lists them), or measure a new run first")


MAX_REF = 1024


def check_ref(ref: object) -> str:
    """A run reference from the command line: text a path can be made of (the file system refuses
    a name over 255 bytes with ENAMETOOLONG; lbench says so first)."""
    if not isinstance(ref, str) or not ref or "\0" in ref or len(ref.encode(errors="replace")) > MAX_REF \
            or any(len(part.encode(errors="replace")) > 255 for part in ref.split("/")):
        raise BadInput(f"bad run reference {str(ref)[:80]!r}{'...' if len(str(ref)) > 80 else ''}", where="RUN",
                       hint="a run id (lbench runs lists them), a run directory, 'latest' or baseline:NAME")
    return ref


def resolve_run(ref: str, results_root: Path, *, kinds: Collection[str] | None = None) -> Run:
    """A run id / directory / 'latest' (of ``kinds`` when given), or ``baseline:NAME``."""
    check_ref(ref)
    if ref.startswith(PREFIX):
        return load(ref[len(PREFIX):], results_root)
    return open_run(ref, results_root, kinds=kinds)
