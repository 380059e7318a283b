"""The archive of runs from many machines: ``<archive>/<machine id>/<run id>/``.

As asv's ``results/<machine>/``, one folder per machine (the run record's machine fingerprint id,
``harness/record.py``), each holding run directories exactly as lbench wrote them.  The archive is
append-only and a plain directory: CI jobs may fill it by any means (artefacts, a git branch,
rsync, object storage); ``copy_runs`` is the checked way in (``catalog.add_runs`` then catalogs them):

- each run is read through the record reader (untrusted input); a damaged run, or one still
  ``running``, is refused with the reason;
- a run added twice is one run: the manifest's bytes are compared by sha256; another run under an
  id the archive already holds is refused (exit 2);
- only regular files are copied (symlinks, FIFOs and devices are never followed nor copied), into
  a temporary folder inside the machine's folder that is renamed into place once complete, so an
  interrupted add leaves nothing half-copied (a leftover ``.adding-*`` folder is ignored by every
  reader and removed by the next add); of two adds of one run at once, one renames its copy into
  place and the other finds the same run there.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.errors import BadInput
from harness.record import RunRecord, parse_record
from harness.untrusted import MAX_JSON_BYTES, MAX_TABLE_BYTES, open_regular, read_bytes

CATALOG_DIR = ".catalog"  # harness/history/catalog.py
TMP_PREFIX = ".adding-"
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MACHINE_ID = re.compile(r"^[0-9a-f]{12}$")
MAX_DEPTH = 8  # a run directory nests logs/ and claims/<id>/ at most
MAX_FILES = 100_000


def archive_dir(override: str | os.PathLike[str] | None = None, results: str | os.PathLike[str] | None = None) -> Path:
    """``--archive``, else ``$LBENCH_HISTORY_DIR``, else ``history/`` next to the results folder."""
    if override:
        return Path(override).expanduser()
    env = os.environ.get("LBENCH_HISTORY_DIR")
    if env:
        return Path(env).expanduser()
    from harness.paths import results_dir

    return results_dir(results).resolve().parent / "history"


@dataclass(frozen=True)
class Added:
    run_id: str
    machine_id: str
    source: Path
    dest: Path
    outcome: str  # added | already there
    skipped_files: tuple[str, ...] = ()  # symlinks, special files and files the signature does not cover: left out
    signer: str | None = None  # the runner key that signed the run (None: unsigned, added with --allow-unsigned)


@dataclass(frozen=True)
class Refused:
    source: Path
    reason: str
    hint: str | None = None

    def line(self) -> str:
        return f"refused {self.source}: {self.reason}" + (f" (what to do: {self.hint})" if self.hint else "")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def machine_dirs(archive: Path) -> list[Path]:
    try:
        return sorted(d for d in Path(archive).iterdir()
                      if MACHINE_ID.match(d.name) and d.is_dir() and not d.is_symlink())
    except FileNotFoundError:
        return []


def run_dirs(archive: Path) -> Iterator[tuple[str, Path]]:
    """(machine id, run directory) of every archived run (no manifest is read), in name order.
    One ``scandir`` per machine: the entry's own type says "directory, not a link" without a
    ``stat`` per run (every reader lists the archive first: 100,000 runs, 100,000 stats)."""
    for mdir in machine_dirs(archive):
        with os.scandir(mdir) as entries:
            names = sorted(e.name for e in entries if not e.name.startswith(".") and e.is_dir(follow_symlinks=False))
        for name in names:
            yield mdir.name, mdir / name


def find_run(archive: Path, run_id: str) -> Path | None:
    for mdir in machine_dirs(archive):
        d = mdir / run_id
        if d.is_dir():
            return d
    return None


def _read_source(run_dir: Path) -> tuple[bytes, RunRecord]:
    manifest = run_dir / "manifest.json"
    data = read_bytes(manifest, max_bytes=MAX_JSON_BYTES, what="run's manifest")
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BadInput(f"the run's manifest is not valid JSON ({type(exc).__name__})", where=str(manifest),
                       hint="the run is damaged; run it again, or copy it again") from None
    record = parse_record(value, str(manifest), manifest)
    return data, record


def _copy_tree(src: Path, dest: Path, skipped: list[str], depth: int = 0, count: list[int] | None = None) -> None:
    """Regular files and folders of ``src`` into ``dest`` (created); never follows a symlink."""
    count = count if count is not None else [0]
    if depth > MAX_DEPTH:
        raise BadInput(f"the run nests folders deeper than {MAX_DEPTH} levels", where=str(src),
                       hint="this is not a folder lbench wrote; copy the run again")
    dest.mkdir()
    with os.scandir(src) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            path = Path(entry.path)
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                _copy_tree(path, dest / entry.name, skipped, depth + 1, count)
            elif stat.S_ISREG(st.st_mode):
                count[0] += 1
                if count[0] > MAX_FILES:
                    raise BadInput(f"the run holds more than {MAX_FILES:,} files", where=str(src),
                                   hint="this is not a folder lbench wrote")
                fd, _ = open_regular(path, max_bytes=MAX_TABLE_BYTES, what=f"file {entry.name}")
                with os.fdopen(fd, "rb") as fh, open(dest / entry.name, "xb") as out:
                    shutil.copyfileobj(fh, out, 1 << 20)
                os.utime(dest / entry.name, ns=(st.st_atime_ns, st.st_mtime_ns))
            else:  # symlink, FIFO, socket, device: never followed, never copied
                skipped.append(str(path.relative_to(path.parents[depth])))


def _clean_leftovers(machine_dir: Path) -> None:
    for d in machine_dir.glob(TMP_PREFIX + "*"):
        try:
            pid = int(d.name.rsplit("-", 1)[-1])
            os.kill(pid, 0)  # its add is still going
        except (ValueError, ProcessLookupError):
            shutil.rmtree(d, ignore_errors=True)
        except PermissionError:
            pass


def _already_there(run_id: str, machine_id: str, run_dir: Path, existing: Path, data: bytes) -> Added:
    """The same run (the manifests' sha256 match), or ``BadInput``: another run under that id."""
    try:
        held = read_bytes(existing / "manifest.json", max_bytes=MAX_JSON_BYTES, what="archived manifest")
    except BadInput:
        held = b""
    if _sha256(held) == _sha256(data):
        return Added(run_id, machine_id, run_dir, existing, "already there")
    raise BadInput(f"the archive holds another run with the id {run_id} (its manifest differs)",
                   where=f"{run_dir} vs {existing}",
                   hint="run ids are unique; this is a different run under the same id, or a copy that was "
                        "changed after it was archived: keep one, rename nothing")


def _admit(tmp: Path, archive: Path, allow_unsigned: bool) -> tuple[str | None, list[str]]:
    """The staged copy checked before it is renamed into place: its signature (the signer's key, or
    None when unsigned and ``allow_unsigned``), the files it leaves out, and its tables' bounds."""
    from harness.attest import verify_run
    from harness.history.table_bounds import check_run_tables
    from harness.history.trust import trust_path, trusted_keys

    verified = verify_run(tmp)
    trusted = trusted_keys(archive)
    if verified is None and not allow_unsigned:
        raise BadInput("the run is not signed by a runner (no signature.json)", where=str(tmp),
                       hint="add runs as their runner wrote them (lbench signs each run it makes); an unsigned run "
                            "goes in only with --allow-unsigned, marked untrusted and never a gate baseline")
    if verified is not None and verified.key not in trusted and not allow_unsigned:
        raise BadInput(f"the run is signed by runner key {verified.key[:16]}…, which the archive does not trust",
                       where=str(trust_path(archive)),
                       hint=f"if that runner is yours: lbench history trust add {verified.key} --label NAME; "
                            "else --allow-unsigned adds it untrusted (never a gate baseline)")
    left_out = list(verified.left_out) if verified is not None else []
    for rel in left_out:  # not covered by the signature: never enters the archive
        (tmp / rel).unlink(missing_ok=True)
    check_run_tables(tmp)
    return (verified.key if verified is not None else None), left_out


def add_run(archive: Path, run_dir: Path, *, allow_unsigned: bool = False) -> Added:
    """Copy one run directory into the archive (idempotent); ``BadInput`` when refused.  The copy is
    staged in a hidden folder and checked there (signature, tables' declared bounds and types)
    before it is renamed into place: a refused run never half-enters the archive."""
    run_dir = Path(run_dir)
    if run_dir.is_symlink() or not run_dir.is_dir():
        raise BadInput("not a run directory (a folder with manifest.json)", where=str(run_dir),
                       hint="give run directories, or a results folder that holds them")
    data, record = _read_source(run_dir)
    if record.abandoned:
        raise BadInput(f"the run was abandoned: {record.abandoned} and the run never ended (its manifest still "
                       "says 'running')", where=str(run_dir),
                       hint="a killed run cannot be archived; its journals keep what it measured (lbench report "
                            "renders them); run it again")
    if record.status == "running":
        raise BadInput("the run is still running, or was killed before it ended (status "
                       + (f"{record.status_shown}: its manifest records no process, so a killed run cannot be told "
                          "from a live one)" if record.unverifiable else "'running')"),
                       where=str(run_dir), hint="add it once it has ended; a killed run cannot be archived")
    if not RUN_ID.match(record.run_id):
        raise BadInput(f"the run id {record.run_id[:60]!r} is not one lbench writes", where=str(run_dir),
                       hint="the run is damaged; run it again")
    machine_id = record.machine.id
    existing = find_run(archive, record.run_id)
    if existing is not None:
        return _already_there(record.run_id, machine_id, run_dir, existing, data)
    mdir = Path(archive) / machine_id
    mdir.mkdir(parents=True, exist_ok=True)
    _clean_leftovers(mdir)
    tmp = mdir / f"{TMP_PREFIX}{record.run_id}-{secrets.token_hex(4)}-{os.getpid()}"
    skipped: list[str] = []
    try:
        _copy_tree(run_dir, tmp, skipped)
        if _sha256((tmp / "manifest.json").read_bytes()) != _sha256(data):
            raise BadInput("the run's manifest changed while it was copied", where=str(run_dir),
                           hint="add it again once the run has ended")
        try:
            signer, left_out = _admit(tmp, Path(archive), allow_unsigned)
        except BadInput as exc:
            raise BadInput(exc.what, where=(exc.where or "").replace(str(tmp), str(run_dir)), hint=exc.hint) from None
        skipped += left_out
        try:
            os.rename(tmp, mdir / record.run_id)
        except OSError:
            if not (mdir / record.run_id).is_dir():
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # another add of the same id got there first
            return _already_there(record.run_id, machine_id, run_dir, mdir / record.run_id, data)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Added(record.run_id, machine_id, run_dir, mdir / record.run_id, "added", tuple(skipped), signer)


def _has_manifest(d: Path) -> bool:
    return (d / "manifest.json").exists() or (d / "manifest.json").is_symlink()


def _runs_below(p: Path, depth: int) -> list[Path]:
    if _has_manifest(p):
        return [p]
    if depth >= 3:
        return []
    found: list[Path] = []
    for d in sorted(p.iterdir()):
        if not d.name.startswith(".") and d.is_dir() and not d.is_symlink():
            found += _runs_below(d, depth + 1)
    return found


def expand_sources(paths: Iterable[Path]) -> tuple[list[Path], list[Refused]]:
    """Run directories from the paths given: a run directory as is; a folder of runs (a results
    folder, a folder of CI artefacts each holding runs, another archive) as every run up to three
    levels below it."""
    runs: list[Path] = []
    refused: list[Refused] = []
    for p in map(Path, paths):
        if p.is_symlink() or not p.is_dir():
            refused.append(Refused(p, "not a directory (symbolic links are not followed)"))
            continue
        found = _runs_below(p, 0)
        if not found:
            refused.append(Refused(p, "holds no run directory (no manifest.json in it or below it)"))
        runs += found
    return runs, refused


def copy_runs(archive: Path, paths: Iterable[Path], *, allow_unsigned: bool = False
               ) -> tuple[list[Added], list[Refused]]:
    """Every run under ``paths`` into the archive; each either copied whole, already there, or
    refused with its reason (the others go on).  ``harness.history.catalog.add_runs`` copies and
    then brings the catalog up to date."""
    archive = Path(archive)
    runs, refused = expand_sources(paths)
    added: list[Added] = []
    for run_dir in runs:
        try:
            added.append(add_run(archive, run_dir, allow_unsigned=allow_unsigned))
        except BadInput as exc:
            refused.append(Refused(run_dir, exc.what, exc.hint))
    return added, refused
