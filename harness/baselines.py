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
import shutil
import time
from collections.abc import Collection
from pathlib import Path

from harness import paths
from harness.errors import BadInput
from harness.store import Run, open_run

PREFIX = "baseline:"


def fingerprint(manifest: dict) -> dict:
    host, engine = manifest.get("host", {}), manifest.get("engine", {})
    fp = {"chip": host.get("cpu_model"), "machine": host.get("machine"), "os": host.get("os"),
          "os_release": host.get("macos_version") or host.get("os_release"),
          "engine_build": engine.get("build_number"), "engine_sha256": (engine.get("sha256") or "")[:16],
          "virtual": host.get("virtual")}
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


def _roots(results_root: Path | None) -> list[Path]:
    return [root(results_root), old_root()]


def save(run: Run, name: str, results_root: Path | None = None) -> Path:
    if not name or "/" in name or name.startswith("."):
        raise BadInput(f"bad baseline name {name!r}", where="--name", hint="letters, digits, - and _")
    base = root(results_root)
    base.mkdir(parents=True, exist_ok=True)
    dest = base / name
    tmp = base / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(run.dir, tmp / run.dir.name)
    (tmp / "baseline.json").write_text(json.dumps({"name": name, "run_id": run.run_id, "saved_at":
                                                   time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                                   "fingerprint": fingerprint(run.manifest)}, indent=2))
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


def list_baselines(results_root: Path | None = None) -> list[dict]:
    """Saved baselines, those beside the results first; one of the same name in the old cache
    location is listed only when there is none beside the results (``old_location``: True)."""
    out, seen = [], set()
    for base in _roots(results_root):
        for d in sorted(base.glob("*/baseline.json")) if base.is_dir() else []:
            try:
                info = json.loads(d.read_text())
            except ValueError:
                continue
            if info.get("name") in seen:
                continue
            seen.add(info.get("name"))
            out.append({**info, "dir": str(d.parent), "old_location": base == old_root()})
    return out


def load(name: str, results_root: Path | None = None) -> Run:
    for base in _roots(results_root):
        meta = base / name / "baseline.json"
        if meta.is_file():
            info = json.loads(meta.read_text())
            return open_run(meta.parent / info["run_id"], meta.parent)
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


def resolve_run(ref: str, results_root: Path, *, kinds: Collection[str] | None = None) -> Run:
    """A run id / directory / 'latest' (of ``kinds`` when given), or ``baseline:NAME``."""
    if ref.startswith(PREFIX):
        return load(ref[len(PREFIX):], results_root)
    return open_run(ref, results_root, kinds=kinds)
