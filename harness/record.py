"""The run record: a run's ``manifest.json``, read, validated and typed.

As pyperf's ``Benchmark``/``Run``, a ``RunRecord`` is the one way lbench reads what a
run was: host, engine, models, configuration, cells, status and times.  Every reader
(report, compare, gate, evidence, ``lbench runs``, bisect, baselines, history) takes
a ``RunRecord``; none digs through the manifest by key.

Manifests are untrusted input (CI artefacts, runs sent by others): ``parse_record``
checks every field's type and refuses a damaged one in one line (``BadInput``, exit 2).
There is one reader per schema version (``READERS``); a version-1 manifest (lbench
before the machine fingerprint) reads as a version-2 record, its fingerprint computed
from the host facts it holds.

``check_comparable`` states once which runs may be pooled or compared
(docs/results.md, "What can be compared").
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

from harness import typed_toml
from harness.errors import BadInput
from harness.probes.run_process import gone, written_before_boot
from harness.untrusted import read_json

SCHEMA_VERSION = 3  # 2: host.fingerprint (the machine, for history across machines); 3: process (pid, start,
# host, boot) the run ran in, so a killed run reads "abandoned"
STATUSES = ("running", "complete", "interrupted", "failed")  # as written in a manifest
ABANDONED = "abandoned"  # read, never written: 'running', and its process is provably gone (harness/probes/run_process.py)
_EMPTY: Mapping[str, Any] = MappingProxyType({})


class _Fields:
    """Typed access to one object of the manifest, each failure naming the field.  The types are
    checked by the one typed reader, ``harness.typed_toml.value``; the message is the manifest's own
    ("the run's manifest field 'models[0].bytes' is a str, expected an integer")."""

    def __init__(self, data: object, where: str, path: str) -> None:
        if not isinstance(data, dict):
            raise BadInput(f"the run's manifest field {path!r} is a {type(data).__name__}, expected an object",
                           where=where, hint="the run is damaged; run it again, or copy it again")
        self.data, self.where, self.path = data, where, path

    def _bad(self, key: str, expected: str) -> BadInput:
        value = self.data.get(key)
        return BadInput(f"the run's manifest field '{self.path}.{key}' is a {type(value).__name__}, "
                        f"expected {expected}", where=self.where,
                        hint="the run is damaged; run it again, or copy it again")

    def _typed(self, key: str, hint: object, expected: str, default: object = None) -> Any:
        """The value at ``key`` (``default`` when absent) as ``hint`` or None."""
        try:
            return typed_toml.value(self.data.get(key, default), hint, key, self.where)
        except BadInput:
            raise self._bad(key, expected) from None

    def text(self, key: str, default: str | None = None) -> str | None:
        return self._typed(key, str | None, "text", default)

    def integer(self, key: str, default: int | None = None) -> int | None:
        value = self._typed(key, int | None, "an integer", default)
        if value is not None and abs(value) > 2 ** 63:
            raise self._bad(key, "an integer of at most 64 bits")
        return value

    def number(self, key: str) -> float | None:
        value = self.data.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2 ** 63:
            raise self._bad(key, "a number")
        return self._typed(key, float | None, "a number")

    def flag(self, key: str) -> bool | None:
        return self._typed(key, bool | None, "true or false")

    def mapping(self, key: str) -> Mapping[str, Any]:
        value = self._typed(key, dict | None, "an object")
        return _EMPTY if value is None else value

    def mappings(self, key: str) -> list[dict]:
        return self._typed(key, list[dict] | None, "a list of objects") or []

    def texts(self, key: str) -> tuple[str, ...]:
        return self._typed(key, tuple[str, ...] | None, "a list of texts") or ()


# ---- the machine -------------------------------------------------------------------------------

FINGERPRINT_FIELDS = ("cpu_model", "machine", "cpu_logical", "ram_gib", "os", "os_release", "gpu")


@dataclass(frozen=True)
class MachineFingerprint:
    """What makes two runs' numbers comparable as the same machine: chip or CPU model, core
    count, memory (GiB), OS and its release (kernel build / macOS version), GPU where readable.
    The hostname is not in it (CI runners are renamed; two identical Macs are one machine class)."""

    cpu_model: str | None
    machine: str | None
    cpu_logical: int | None
    ram_gib: int | None
    os: str | None
    os_release: str | None
    gpu: str | None

    @property
    def id(self) -> str:
        text = json.dumps({f: getattr(self, f) for f in FINGERPRINT_FIELDS}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def label(self) -> str:
        """A short readable name: 'Apple M2 Ultra, 24 CPUs, 192 GiB, Darwin 14.5'."""
        parts = [self.cpu_model or self.machine or "unknown CPU"]
        if self.cpu_logical:
            parts.append(f"{self.cpu_logical} CPUs")
        if self.ram_gib:
            parts.append(f"{self.ram_gib} GiB")
        parts.append(" ".join(p for p in (self.os, self.os_release) if p) or "unknown OS")
        return ", ".join(parts)

    def as_dict(self) -> dict:
        return {"id": self.id, **{f: getattr(self, f) for f in FINGERPRINT_FIELDS}}

    def differences(self, other: MachineFingerprint) -> list[str]:
        return [f"{f}: {getattr(self, f)!r} vs {getattr(other, f)!r}" for f in FINGERPRINT_FIELDS
                if getattr(self, f) != getattr(other, f)]


def fingerprint_of(host: Mapping[str, Any]) -> MachineFingerprint:
    """The fingerprint of a host-facts mapping (harness/probes/host.py), as written or as read back."""
    f = _Fields(dict(host), "host facts", "host")
    ram = f.integer("ram_bytes")
    gpu = f.text("mac_gpu") or f.text("mac_chip") or f.text("nvidia_name")
    return MachineFingerprint(
        cpu_model=f.text("cpu_model"), machine=f.text("machine"), cpu_logical=f.integer("cpu_logical"),
        ram_gib=None if ram is None else round(ram / 2 ** 30), os=f.text("os"),
        os_release=f.text("macos_version") or f.text("os_release"), gpu=gpu if isinstance(gpu, str) else None)


@dataclass(frozen=True)
class Host:
    hostname: str | None
    os: str | None
    os_release: str | None
    machine: str | None
    cpu_model: str | None
    cpu_logical: int | None
    ram_bytes: int | None
    virtual: bool | None
    metal: bool | None
    fingerprint: MachineFingerprint
    facts: Mapping[str, Any]  # everything host_facts() recorded, for display

    @classmethod
    def parse(cls, data: Mapping[str, Any], where: str) -> Host:
        f = _Fields(dict(data), where, "host")
        return cls(hostname=f.text("hostname"), os=f.text("os"), os_release=f.text("macos_version") or f.text("os_release"),
                   machine=f.text("machine"), cpu_model=f.text("cpu_model"), cpu_logical=f.integer("cpu_logical"),
                   ram_bytes=f.integer("ram_bytes"), virtual=f.flag("virtual"), metal=f.flag("metal"),
                   fingerprint=fingerprint_of(data), facts=MappingProxyType(dict(data)))


# ---- the engine and the models ----------------------------------------------------------------

class _FactsView:
    """Read access to everything the manifest recorded for the entry, beyond its typed fields
    (templates show them: ``m.path``, ``c.argv``); typed fields win."""

    facts: Mapping[str, Any]

    def get(self, key: str, default: Any = None) -> Any:
        return self.facts.get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self.facts[key]

    def __contains__(self, key: object) -> bool:
        return key in self.facts


@dataclass(frozen=True)
class EngineInfo:
    name: str  # llama-server, mlx, openai, ollama, ...
    path: str | None
    build_number: int | None
    version: str | None
    sha256: str | None
    backend: str | None
    facts: Mapping[str, Any]

    @classmethod
    def parse(cls, data: Mapping[str, Any], where: str) -> EngineInfo:
        f = _Fields(dict(data), where, "engine")
        return cls(name=f.text("engine") or ("llama-server" if f.text("path") or f.integer("build_number") else "unknown"),
                   path=f.text("path"),
                   build_number=f.integer("build_number"), version=f.text("version"), sha256=f.text("sha256"),
                   backend=f.text("backend"), facts=MappingProxyType(dict(data)))

    @property
    def build_label(self) -> str:
        return f"build {self.build_number}" if self.build_number is not None else (self.version or self.name)


@dataclass(frozen=True)
class ModelEntry(_FactsView):
    label: str
    ref: str | None
    source: str | None  # synthetic, catalog, path, discovered, server, ...
    sha256: str | None
    bytes: int | None
    synthetic: bool
    quant: str | None
    preset: str | None
    name: str | None
    facts: Mapping[str, Any]

    @classmethod
    def parse(cls, data: dict, where: str, index: int) -> ModelEntry:
        f = _Fields(data, where, f"models[{index}]")
        label = f.text("label") or f.text("ref") or f"model {index}"
        return cls(label=label, ref=f.text("ref"), source=f.text("source"), sha256=f.text("sha256"),
                   bytes=f.integer("bytes"), synthetic=bool(f.flag("synthetic")) or f.text("source") == "synthetic",
                   quant=f.text("quant"), preset=f.text("preset"), name=f.text("name"),
                   facts=MappingProxyType(dict(data)))


@dataclass(frozen=True)
class Cell(_FactsView):
    """One (model, setting, engine) cell of an idle or calibrate run."""

    index: int
    model: str
    setting: str
    engine: str | None
    keep_alive: str | None
    notes: tuple[str, ...]
    applicable: bool
    error: str | None
    n_samples: int
    facts: Mapping[str, Any]  # argv, env_overrides, self_check, startup, cache, ...

    @classmethod
    def parse(cls, data: dict, where: str, index: int) -> Cell:
        f = _Fields(data, where, f"cells[{index}]")
        notes = f.texts("notes")
        applicable = f.flag("applicable")
        return cls(index=f.integer("index", index) or 0, model=f.text("model") or "?", setting=f.text("setting") or "?",
                   engine=f.text("engine"), keep_alive=f.text("keep_alive"), notes=notes,
                   applicable=(not notes) if applicable is None else applicable, error=f.text("error"),
                   n_samples=f.integer("n_samples", 0) or 0, facts=MappingProxyType(dict(data)))

    @property
    def self_check(self) -> Mapping[str, Any]:
        value = self.facts.get("self_check")
        return value if isinstance(value, dict) else _EMPTY


@dataclass(frozen=True)
class Quality:
    before: Mapping[str, Any]
    after: Mapping[str, Any]
    warnings: tuple[str, ...]

    @classmethod
    def parse(cls, data: Mapping[str, Any], where: str) -> Quality:
        f = _Fields(dict(data), where, "quality")
        return cls(before=f.mapping("before"), after=f.mapping("after"), warnings=f.texts("warnings"))


# ---- the record --------------------------------------------------------------------------------

CORE_KEYS = frozenset({"schema_version", "lbench_version", "run_id", "kind", "status", "command", "argv",
                       "started_at", "ended_at", "n_samples", "rows", "error", "config", "host", "engine",
                       "models", "cells", "quality", "process"})


@dataclass(frozen=True)
class RunRecord:
    """What a run was, typed.  ``sections`` holds the kind's own parts of the manifest (a swap
    run's ``router``, ``client``, ``sampler``, ``deadlines``; a repro run's ``claims``; an idle
    run's ``like_for_like``), each read with ``section(name)``."""

    schema_version: int  # of the manifest as written (the record itself is always SCHEMA_VERSION)
    run_id: str
    kind: str
    status: str
    lbench_version: str | None
    command: str | None
    argv: tuple[str, ...]
    started_at: str | None
    ended_at: str | None
    n_samples: int
    rows: Mapping[str, int]
    error: str | None
    config: Mapping[str, Any]
    host: Host
    engine: EngineInfo
    models: tuple[ModelEntry, ...]
    cells: tuple[Cell, ...]
    quality: Quality
    sections: Mapping[str, Any] = field(default_factory=dict)
    process: Mapping[str, Any] = field(default_factory=dict)  # pid, start, host, boot it ran in (schema 3)
    abandoned: str | None = None  # why a 'running' run is known dead (status is then "abandoned")
    # why a 'running' run can be told neither alive nor dead (a manifest that records no process), else None
    unverifiable: str | None = None

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    @property
    def status_shown(self) -> str:
        """The status as listings and reports show it: ``running (unverifiable: written by an older lbench)``
        for a running run that cannot be judged, else the status."""
        return f"running (unverifiable: {self.unverifiable})" if self.unverifiable else self.status

    @property
    def unfinished(self) -> bool:
        """The manifest says ``running``: the run goes on, or its process died (``abandoned``)."""
        return self.status in ("running", ABANDONED)

    @property
    def machine(self) -> MachineFingerprint:
        return self.host.fingerprint

    @property
    def model_labels(self) -> tuple[str, ...]:
        return tuple(m.label for m in self.models)

    @property
    def settings(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.setting for c in self.cells))

    @property
    def synthetic_models(self) -> tuple[ModelEntry, ...]:
        return tuple(m for m in self.models if m.synthetic)

    @property
    def started(self) -> datetime | None:
        return _time(self.started_at)

    @property
    def duration_s(self) -> float | None:
        start, end = _time(self.started_at), _time(self.ended_at)
        if start is None or end is None:
            return None
        try:
            return (end - start).total_seconds()
        except TypeError:  # one naive, one aware
            return None

    def section(self, name: str) -> Mapping[str, Any]:
        """A kind's own part of the manifest (an object), empty when absent."""
        value = self.sections.get(name)
        return value if isinstance(value, dict) else _EMPTY

    def to_manifest(self) -> dict:
        """The manifest as read (every section, for display and for scanning: redaction)."""
        return {"schema_version": self.schema_version, "lbench_version": self.lbench_version, "run_id": self.run_id,
                "kind": self.kind, "status": self.status, "command": self.command, "argv": list(self.argv),
                "started_at": self.started_at, "ended_at": self.ended_at, "n_samples": self.n_samples,
                "rows": dict(self.rows), "error": self.error, "config": dict(self.config),
                "host": dict(self.host.facts), "engine": dict(self.engine.facts),
                "models": [dict(m.facts) for m in self.models], "cells": [dict(c.facts) for c in self.cells],
                "quality": {"before": dict(self.quality.before), "after": dict(self.quality.after),
                            "warnings": list(self.quality.warnings)},
                **({"process": dict(self.process)} if self.process else {}), **dict(self.sections)}

    def config_int(self, key: str, default: int = 0) -> int:
        value = self.config.get(key, default)
        return value if isinstance(value, int) and not isinstance(value, bool) else default


def _time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def _manifest_mtime(manifest: Path | None) -> float | None:
    if manifest is None:
        return None
    try:
        return os.stat(manifest, follow_symlinks=False).st_mtime
    except OSError:
        return None


def _judge_running(process: Mapping[str, Any], version: int, host: Host,
                   manifest: Path | None) -> tuple[str | None, str | None]:
    """(why a 'running' run is known dead, why it cannot be judged): by its recorded process (schema 3);
    for a manifest without one (versions 1 and 2), dead only when it was written on this host before
    this machine last booted, else unverifiable."""
    if process:
        return gone(process), None
    dead = written_before_boot(host.hostname, _manifest_mtime(manifest))
    if dead is not None:
        return dead, None
    return None, ("written by an older lbench" if version < 3 else "its manifest records no process")


def _read_v1(data: dict, where: str, manifest: Path | None = None) -> RunRecord:
    """Versions 1 to 3 share a layout; version 1 has no host.fingerprint (computed from the facts),
    versions 1 and 2 no ``process``: a run of theirs still ``running`` is ``abandoned`` when its manifest
    (``manifest``, when the reader has the file) was written here before this machine booted, else
    ``running``, unverifiable."""
    f = _Fields(data, where, "manifest")
    kind = f.text("kind")
    if not kind:
        raise BadInput("the run's manifest has no 'kind'", where=where, hint="the run is damaged; run it again")
    status = f.text("status") or "running"
    if status not in STATUSES:
        raise BadInput(f"the run's manifest has an unknown status {status!r}", where=where,
                       hint=f"lbench writes one of {', '.join(STATUSES)}; the run is damaged")
    rows = f.mapping("rows")
    if not all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in rows.items()):
        raise BadInput("the run's manifest field 'manifest.rows' is not a table of counts", where=where,
                       hint="the run is damaged; run it again")
    argv = data.get("argv")
    process = f.mapping("process")
    version = f.integer("schema_version", 1) or 1
    host = Host.parse(f.mapping("host"), where)
    abandoned, unverifiable = _judge_running(process, version, host, manifest) if status == "running" else (None, None)
    sections = {k: v for k, v in data.items() if k not in CORE_KEYS}
    return RunRecord(
        schema_version=version, run_id=f.text("run_id") or Path(where).parent.name,
        kind=kind, status=ABANDONED if abandoned else status, lbench_version=f.text("lbench_version"), command=f.text("command"),
        argv=f.texts("argv") if argv is not None else (), started_at=f.text("started_at"), ended_at=f.text("ended_at"),
        n_samples=f.integer("n_samples", 0) or 0, rows=MappingProxyType(dict(rows)), error=f.text("error"),
        config=MappingProxyType(dict(f.mapping("config"))), host=host,
        engine=EngineInfo.parse(f.mapping("engine"), where),
        models=tuple(ModelEntry.parse(m, where, i) for i, m in enumerate(f.mappings("models"))),
        cells=tuple(Cell.parse(c, where, i) for i, c in enumerate(f.mappings("cells"))),
        quality=Quality.parse(f.mapping("quality"), where), sections=MappingProxyType(sections),
        process=MappingProxyType(dict(process)), abandoned=abandoned, unverifiable=unverifiable)


READERS: dict[int, Callable[[dict, str, Path | None], RunRecord]] = {1: _read_v1, 2: _read_v1, 3: _read_v1}


def parse_record(data: object, where: str, manifest: Path | None = None) -> RunRecord:
    """A ``RunRecord`` from a manifest's JSON value, or ``BadInput`` saying what is wrong with it.
    ``manifest``: the file it was read from, when there is one (an older manifest's time can prove
    its run over, see ``_judge_running``)."""
    if not isinstance(data, dict) or not data:
        raise BadInput("the run's manifest is empty or not a JSON object", where=where,
                       hint="the run is damaged; run it again")
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BadInput(f"the run's manifest has schema_version {version!r}", where=where,
                       hint="the run is damaged; run it again")
    reader = READERS.get(version)
    if reader is None:
        raise BadInput(f"the run's manifest has schema_version {version}; this lbench reads up to "
                       f"{max(READERS)}", where=where, hint="use the lbench version that wrote it")
    return reader(data, where, manifest)


def read_record(manifest_path: Path) -> RunRecord:
    """The record of ``manifest.json`` at ``manifest_path`` (read as untrusted input)."""

    return parse_record(read_json(manifest_path, what="run's manifest"), str(manifest_path), manifest_path)


# ---- what can be compared ---------------------------------------------------------------------

@dataclass(frozen=True)
class Comparability:
    """Why runs may not be pooled (``refused``) and what differs between two sides (``flags``)."""

    refused: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()

    def raise_if_refused(self, where: str) -> None:
        if self.refused:
            raise BadInput("these runs cannot be pooled as repetitions of one measurement: "
                           + "; ".join(self.refused), where=where,
                           hint="give one side runs of one machine, engine build and model files "
                                "(lbench runs lists them), or compare them as two sides")


def _identity(r: RunRecord) -> dict[str, object]:
    return {"machine": r.machine.id, "engine": (r.engine.name, r.engine.build_number, (r.engine.sha256 or "")[:16]),
            "backend": backend_of(r),
            "models": tuple(sorted((m.label, m.sha256 or "") for m in r.models))}


def backend_of(r: RunRecord) -> str:
    """The ggml backend a run's engine used; runs written before backends were recorded ran the
    CPU build on Linux or Metal on macOS (what lbench built then)."""
    if r.engine.backend:
        return r.engine.backend
    return "metal" if r.machine.os == "Darwin" else "cpu"


def check_comparable(side_a: Iterable[RunRecord], side_b: Iterable[RunRecord] = ()) -> Comparability:
    """The rule, stated once:

    - runs pooled on one side are repetitions: they must share the machine fingerprint, the
      engine (name, build, binary hash, backend) and the model files (label and sha256); otherwise the
      side is **refused** (a pooled interval over different things is no interval);
    - between the two sides a difference is what the comparison is about (a new engine build,
      another machine, another model file): each one is **flagged**, by name, in the verdict
      output, so a verdict never silently spans machines or model files."""
    a, b = list(side_a), list(side_b)
    refused: list[str] = []
    for name, side in (("baseline", a), ("candidate", b)):
        if len(side) < 2:
            continue
        first = _identity(side[0])
        for r in side[1:]:
            ident = _identity(r)
            for key in first:
                if ident[key] != first[key]:
                    refused.append(f"{name} runs {side[0].run_id} and {r.run_id} differ in {key}")
    flags: list[str] = []
    if a and b:
        ra, rb = a[0], b[0]
        flags += ra.machine.differences(rb.machine)
        for key, va, vb in (("engine", ra.engine.name, rb.engine.name),
                            ("engine_build", ra.engine.build_number, rb.engine.build_number),
                            ("engine_sha256", (ra.engine.sha256 or "")[:16], (rb.engine.sha256 or "")[:16]),
                            ("backend", backend_of(ra), backend_of(rb))):
            if va != vb:
                flags.append(f"{key}: {va} vs {vb}")
        hashes_a = {m.label: m.sha256 for m in ra.models}
        changed = [m.label for m in rb.models if m.label in hashes_a and hashes_a[m.label] != m.sha256]
        if changed:
            flags.append("other model files under the same name: " + ", ".join(changed))
    return Comparability(tuple(dict.fromkeys(refused)), tuple(flags))
