"""Saved baselines, keyed by machine fingerprint.

``lbench baseline save RUN --name main`` copies the run into
``<cache>/baselines/<name>/`` with ``baseline.json`` (name, run id, fingerprint,
time).  The fingerprint is what makes numbers comparable: chip, OS release,
engine build and binary hash.  Comparing against a baseline from another
fingerprint is allowed but warned about.
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
from harness.record import RunRecord
from harness.store import Run, open_run

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


def root() -> Path:
    return paths.cache_dir() / "baselines"


def save(run: Run, name: str) -> Path:
    if not name or "/" in name or name.startswith("."):
        raise BadInput(f"bad baseline name {name!r}", where="--name", hint="letters, digits, - and _")
    dest = root() / name
    tmp = root() / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(run.dir, tmp / run.dir.name)
    (tmp / "baseline.json").write_text(json.dumps({"name": name, "run_id": run.run_id, "saved_at":
                                                   time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                                   "fingerprint": fingerprint(run.record)}, indent=2))
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


def list_baselines() -> list[dict]:
    out = []
    for d in sorted(root().glob("*/baseline.json")) if root().is_dir() else []:
        try:
            out.append({**json.loads(d.read_text()), "dir": str(d.parent)})
        except ValueError:
            continue
    return out


def load(name: str) -> Run:
    meta = root() / name / "baseline.json"
    if not meta.is_file():
        known = ", ".join(b["name"] for b in list_baselines()) or "none saved"
        raise BadInput(f"no baseline named {name!r}", where=str(root()), hint=f"known: {known}; "
                       "save one with `lbench baseline save RUN --name NAME`")
    info = json.loads(meta.read_text())
    return open_run(meta.parent / info["run_id"], meta.parent)


def resolve_run(ref: str, results_root: Path, *, kinds: Collection[str] | None = None) -> Run:
    """A run id / directory / 'latest' (of ``kinds`` when given), or ``baseline:NAME``."""
    if ref.startswith(PREFIX):
        return load(ref[len(PREFIX):])
    return open_run(ref, results_root, kinds=kinds)
