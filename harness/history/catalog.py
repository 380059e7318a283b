"""The archive's catalog: one row per run, and one per metric each run's analysis states.

Kept as two Parquet files in ``<archive>/.catalog/`` (``runs.parquet``, ``metrics.parquet``) so a
query over 10,000 runs reads two small files instead of 10,000 manifests.  Each row is made from
the run's typed record (``harness/record.py``) and its analysis (``harness/analysis/persisted.py``:
the stored ``analysis.json`` when it is current, else recomputed from the run's tables, never
written into the archive).  The catalog is only an accelerator: ``refresh`` adds the runs it lacks
and drops those gone, and deleting it loses nothing (``lbench history list`` rebuilds it).

One thing a rebuild could not recompute is when each run first entered the catalog
(``cataloged_at``), which the gate's "runs added since the last gate" rule reads
(``harness/history/gate_state.py``).  So those times are also kept outside ``.catalog/``, in
``<archive>/.cataloged-at.json`` (per run directory: the manifest's sha256 and the time); a rebuild
(``.catalog/`` deleted, or a new ``CATALOG_VERSION``) takes each run's time from there, or from the
old catalog file whatever its version, and only a run neither knows gets the time of this refresh.
A run whose manifest changed under the same name counts as new.

Metrics (``metric``, with ``value`` and its 95% interval ``lo``/``hi`` where one exists):

- idle runs, per (model, setting): ``wake_threshold_s`` (the fitted wake step's pause and its
  interval; null when the sweep shows no clear step) and ``wake_penalty_ms`` (woken - warm
  median, bootstrap interval), both from the idle analysis' ``wake`` rows, and the wake model's regime
  bounds ``wake_last_warm_s`` / ``wake_first_woken_s`` (null without a step) that the warm and woken
  series use;
- swap runs, per model: ``swap_load_ms`` (median spawn -> loaded over the run's loads of that
  model, order-statistic interval) and ``swap_evict_ms`` (median time to stop that model when it
  was the victim); per run (model = the models joined by ``+``): ``peak_children`` and
  ``peak_rss_mb`` (the process tree's peak resident memory), and ``swap_failed_pct`` (the
  percentage of the storm's requests that failed, with its Clopper-Pearson 95% interval and n the
  requests sent; failed runs too, see ``harness/history/series.py``);
- idle runs, per (model, setting), from the run's samples (``harness/history/run_medians.py``,
  one DuckDB pass over the runs a refresh adds): ``idle_warm_p50`` and ``idle_woken_p50``, the
  median measured latency in the warm / woken regime of the run's wake model, with the
  order-statistic 95% interval and n (no woken row without a step).
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness.errors import BadInput
from harness.history.archive import CATALOG_DIR, Added, Refused, _read_source, copy_runs, run_dirs
from harness.history.table_bounds import check_run_tables
from harness.analysis.intervals import clopper_pearson, median_interval
from harness.analysis.frames import json_frame
from harness.analysis.persisted import analyze, read_analysis
from harness.attest import verify_run
from harness.runkind import find_kind, registered
from harness.store import Run

if TYPE_CHECKING:
    from harness.record import RunRecord
    from harness.store import Run

CATALOG_VERSION = 6  # 2: the wake model's regime bounds; 3: each idle run's warm / woken median;
# 4: swap_failed_pct, and a storm's concurrency in its setting; 5: signer and cataloged_at;
# 6: the robust wake model (stalls out of the fit)
RUN_COLUMNS = pa.schema([
    ("run_id", pa.string()), ("machine_id", pa.string()), ("machine_label", pa.string()), ("kind", pa.string()),
    ("status", pa.string()), ("engine", pa.string()), ("engine_build", pa.int64()), ("engine_version", pa.string()),
    ("engine_sha256", pa.string()), ("model", pa.string()), ("models", pa.list_(pa.string())),
    ("settings", pa.list_(pa.string())), ("started_at", pa.string()), ("lbench_version", pa.string()),
    ("n_samples", pa.int64()), ("dir", pa.string()), ("manifest_sha256", pa.string()),
    ("signer", pa.string()), ("cataloged_at", pa.string()),
])
METRIC_COLUMNS = pa.schema([
    ("run_id", pa.string()), ("model", pa.string()), ("setting", pa.string()), ("metric", pa.string()),
    ("value", pa.float64()), ("lo", pa.float64()), ("hi", pa.float64()), ("n", pa.int64()),
])


@dataclass
class Catalog:
    runs: pd.DataFrame
    metrics: pd.DataFrame
    skipped: list[str]


def catalog_dir(archive: Path) -> Path:
    return Path(archive) / CATALOG_DIR


STAMPS_FILE = ".cataloged-at.json"  # outside .catalog/: survives a rebuild
MAX_STAMPS_BYTES = 64 * 1024 * 1024


def _stamps_in(frame: pd.DataFrame) -> dict[str, tuple[str, str]]:
    """dir -> (manifest sha256, cataloged_at) of the catalog rows that have both."""
    if frame.empty or not {"dir", "manifest_sha256", "cataloged_at"} <= set(frame.columns):
        return {}
    return {str(d): (str(h), str(c)) for d, h, c in zip(frame["dir"], frame["manifest_sha256"], frame["cataloged_at"])
            if isinstance(d, str) and isinstance(h, str) and isinstance(c, str) and c}


def _read_stamps(archive: Path) -> dict[str, tuple[str, str]]:
    """When each run first entered the catalog: the stamps file, then an old catalog's rows (any
    version) for runs the file lacks.  Damaged or missing: empty (those runs are new to the gate)."""
    from harness.untrusted import read_json

    stamps: dict[str, tuple[str, str]] = {}
    old = catalog_dir(archive) / "runs.parquet"
    if old.is_file() and not old.is_symlink():
        try:
            table = pq.read_table(old)
            names = [n for n in ("dir", "manifest_sha256", "cataloged_at") if n in table.schema.names]
            stamps.update(_stamps_in(table.select(names).to_pandas()))
        except (OSError, pa.ArrowException, KeyError):
            pass
    path = Path(archive) / STAMPS_FILE
    if path.is_file():
        try:
            doc = read_json(path, what="archive's catalog times", max_bytes=MAX_STAMPS_BYTES, max_depth=3)
        except BadInput:
            doc = None
        if isinstance(doc, dict):
            stamps.update({k: (v[0], v[1]) for k, v in doc.items() if isinstance(k, str) and isinstance(v, list)
                           and len(v) == 2 and all(isinstance(x, str) for x in v)})
    return stamps


def _save_stamps(archive: Path, runs: pd.DataFrame, before: dict[str, tuple[str, str]], quiet: bool) -> None:
    from harness.atomic import atomic_write_json

    stamps = _stamps_in(runs)
    if stamps == before:
        return
    try:
        atomic_write_json(Path(archive) / STAMPS_FILE, {k: list(v) for k, v in sorted(stamps.items())}, indent=None)
    except OSError as exc:
        if not quiet:
            print(f"note: the catalog times could not be saved ({exc.strerror or exc})", file=sys.stderr)


def _num(value: Any) -> float | None:  # a value of the analysis' JSON
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _interval(pair: object) -> tuple[float | None, float | None]:
    if isinstance(pair, (list, tuple)) and len(pair) == 2:
        return _num(pair[0]), _num(pair[1])
    return None, None


def swap_setting(config: Mapping[str, Any]) -> str:
    """A storm's setting: its cap and pattern, and its concurrency when requests overlap (a storm of
    one request at a time keeps the label it had before concurrency was part of it)."""
    label = f"models-max={config.get('models_max', '?')},pattern={config.get('pattern', '?')}"
    concurrency = _num(config.get("concurrency"))
    return label + (f",concurrency={int(concurrency)}" if concurrency and concurrency > 1 else "")


def _median_row(run_id: str, model: str, setting: str, metric: str, values: Iterable[object]) -> dict | None:
    x = np.asarray([v for v in values if _num(v) is not None], dtype=float)
    if x.size == 0:
        return None
    lo, hi, _ = median_interval(x)
    return {"run_id": run_id, "model": model, "setting": setting, "metric": metric, "value": float(np.median(x)),
            "lo": _num(lo), "hi": _num(hi), "n": int(x.size)}


def idle_metrics(record: RunRecord, analysis: dict) -> list[dict]:
    rows: list[dict] = []
    for w in analysis.get("wake") or []:
        if not isinstance(w, dict):
            continue
        model, setting = str(w.get("model")), str(w.get("setting"))
        lo, hi = _interval(w.get("threshold_ci"))
        rows.append({"run_id": record.run_id, "model": model, "setting": setting, "metric": "wake_threshold_s",
                     "value": _num(w.get("threshold_s")), "lo": lo, "hi": hi, "n": None})
        lo, hi = _interval(w.get("penalty_ci"))
        rows.append({"run_id": record.run_id, "model": model, "setting": setting, "metric": "wake_penalty_ms",
                     "value": _num(w.get("penalty_ms")), "lo": lo, "hi": hi, "n": None})
        # the regimes as the run's own wake model bounds them (harness.analysis.regimes.wake_model): the
        # warm and woken series use these, so the trend says what the report says
        step = bool(w.get("has_step"))
        for metric, key in (("wake_last_warm_s", "last_warm_s"), ("wake_first_woken_s", "first_woken_s")):
            rows.append({"run_id": record.run_id, "model": model, "setting": setting, "metric": metric,
                         "value": _num(w.get(key)) if step else None, "lo": None, "hi": None, "n": None})
    return rows


def swap_metrics(record: RunRecord, analysis: dict) -> list[dict]:
    rows: list[dict] = []
    setting = swap_setting(record.config)
    swaps = json_frame(analysis.get("swaps") or {})
    if not swaps.empty and "model" in swaps:
        for model, group in swaps.groupby("model", sort=True):
            row = _median_row(record.run_id, str(model), setting, "swap_load_ms", group.get("spawn_to_loaded_ms", []))
            if row:
                rows.append(row)
        if "victim" in swaps and "victim_stop_ms" in swaps:
            victims = swaps[swaps["victim"].notna()]
            for model, group in victims.groupby("victim", sort=True):
                row = _median_row(record.run_id, str(model), setting, "swap_evict_ms", group["victim_stop_ms"])
                if row:
                    rows.append(row)
    figures = analysis.get("figures") or {}
    all_models = "+".join(record.model_labels)
    peak = _num(figures.get("peak_children"))
    if peak is not None:
        rows.append({"run_id": record.run_id, "model": all_models, "setting": setting, "metric": "peak_children",
                     "value": peak, "lo": None, "hi": None, "n": _num(figures.get("n_memory_samples"))})
    rss = _num(figures.get("peak_rss_bytes"))
    if rss is not None:
        rows.append({"run_id": record.run_id, "model": all_models, "setting": setting, "metric": "peak_rss_mb",
                     "value": rss / 1e6, "lo": None, "hi": None, "n": _num(figures.get("n_memory_samples"))})

    failed, sent = _num(figures.get("n_failed_requests")), _num(figures.get("n_requests"))
    if failed is not None and sent:
        lo, hi = clopper_pearson(int(failed), int(sent))
        rows.append({"run_id": record.run_id, "model": all_models, "setting": setting, "metric": "swap_failed_pct",
                     "value": 100.0 * failed / sent, "lo": 100.0 * lo, "hi": 100.0 * hi, "n": sent})
    return rows


def swap_settings(record: RunRecord) -> list[str]:
    """The setting a storm's runs are filed under (a storm names no cells)."""
    return [swap_setting(record.config)]


def run_metrics(run: Run) -> list[dict]:
    """The catalog's metric rows of one run (a ``harness.store.Run``), from its analysis (its kind's
    ``history.metrics``; a kind without one adds no metrics)."""
    kind = find_kind(run.record.kind)
    if kind is None or kind.history.metrics is None:
        return []
    return kind.history.metrics(run.record, read_analysis(run) or analyze(run))  # never written into the archive


def run_settings(record: RunRecord) -> list[str]:
    """The setting labels the history archive files this run's series under (one per cell; a kind
    whose runs name no cells says its own, ``history.settings``)."""
    kind = find_kind(record.kind)
    if record.settings or kind is None or kind.history.settings is None:
        return list(record.settings)
    return kind.history.settings(record)


def run_row(machine_id: str, rel_dir: str, record: RunRecord, manifest_bytes: bytes, signer: str | None = None,
            cataloged_at: str | None = None) -> dict:
    return {"run_id": record.run_id, "machine_id": machine_id, "machine_label": record.machine.label,
            "kind": record.kind, "status": record.status, "engine": record.engine.name,
            "engine_build": record.engine.build_number, "engine_version": record.engine.version,
            "engine_sha256": record.engine.sha256, "model": record.model_labels[0] if record.models else None,
            "models": list(record.model_labels),
            "settings": run_settings(record),
            "started_at": record.started_at, "lbench_version": record.lbench_version,
            "n_samples": record.n_samples, "dir": rel_dir,
            "manifest_sha256": hashlib.sha256(manifest_bytes).hexdigest(), "signer": signer,
            "cataloged_at": cataloged_at}


def _read_table(path: Path, schema: pa.Schema) -> pd.DataFrame:
    if path.is_symlink() or not path.is_file():  # missing, or not the archive's own file: rebuilt
        return schema.empty_table().to_pandas()
    try:
        table = pq.read_table(path)
        if table.schema.metadata and table.schema.metadata.get(b"lbench_catalog") == str(CATALOG_VERSION).encode() \
                and set(schema.names) <= set(table.schema.names):
            return table.select(schema.names).to_pandas()
    except (OSError, pa.ArrowException):
        pass
    return schema.empty_table().to_pandas()


def _arrow(frame: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    """The frame as an Arrow table of the catalog's schema (NaN and pandas' NA -> null), column by
    column in Arrow's own code (the catalog is converted on every refresh: no loop per value)."""
    columns = {}
    for name in schema.names:
        field = schema.field(name)
        if name not in frame:
            columns[name] = pa.nulls(len(frame), field.type)
        elif pa.types.is_list(field.type):
            columns[name] = pa.array([list(v) if v is not None and not isinstance(v, float) else []
                                      for v in frame[name].tolist()], type=field.type)
        else:
            try:
                columns[name] = pa.array(frame[name], type=field.type, from_pandas=True)
            except (pa.ArrowInvalid, pa.ArrowTypeError):  # e.g. a fractional count: one value at a time
                values = [None if (v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))) else v
                          for v in frame[name].tolist()]
                if pa.types.is_integer(field.type):
                    values = [None if v is None else int(v) for v in values]
                columns[name] = pa.array(values, type=field.type)
    return pa.table(columns, schema=schema.with_metadata({"lbench_catalog": str(CATALOG_VERSION)}))


def _write_table(frame: pd.DataFrame, schema: pa.Schema, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        pq.write_table(_arrow(frame, schema), tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _signer(run_dir: Path, skipped: list[str], rel: str) -> str | None:
    """The runner key whose signature covers the run's files exactly (None: unsigned, or a signature
    that does not verify, or files it does not cover); trust in the key is decided when read."""
    try:
        verified = verify_run(run_dir)
    except BadInput as exc:
        skipped.append(f"signature of {rel}: {exc.what} (the run counts as unsigned)")
        return None
    if verified is None:
        return None
    if verified.left_out:
        skipped.append(f"signature of {rel}: files it does not cover: {', '.join(verified.left_out[:5])} "
                       "(the run counts as unsigned)")
        return None
    return verified.key


def load(archive: Path, *, quiet: bool = True) -> Catalog:
    """The catalog, brought up to date with the archive's run directories first."""
    return refresh(archive, quiet=quiet)


def refresh(archive: Path, *, quiet: bool = True) -> Catalog:
    archive = Path(archive)
    cdir = catalog_dir(archive)
    runs = _read_table(cdir / "runs.parquet", RUN_COLUMNS)
    metrics = _read_table(cdir / "metrics.parquet", METRIC_COLUMNS)
    present = {f"{m}/{d.name}": (m, d) for m, d in run_dirs(archive)}
    known = set(runs["dir"]) if not runs.empty else set()
    gone = known - set(present)
    new_runs: list[dict] = []
    new_metrics: list[dict] = []
    skipped: list[str] = []
    now = datetime.now(timezone.utc).isoformat(timespec="microseconds")
    stamps: dict[str, tuple[str, str]] | None = None  # read once a run is new to the catalog
    for rel, (machine_id, d) in present.items():
        if rel in known:
            continue
        try:
            data, record = _read_source(d)
            check_run_tables(d)  # a run put into the archive by other means than history add: checked here
            signer = _signer(d, skipped, rel)
            stamps = _read_stamps(archive) if stamps is None else stamps
            held = stamps.get(rel)
            first_seen = held[1] if held is not None and held[0] == hashlib.sha256(data).hexdigest() else now
            new_runs.append(run_row(machine_id, rel, record, data, signer, first_seen))
            try:
                new_metrics += run_metrics(Run(d, record))
            except BadInput as exc:
                skipped.append(f"metrics of {rel}: {exc.what}")
            except Exception as exc:  # an analysis that fails on a damaged table: the run still counts
                skipped.append(f"metrics of {rel}: {type(exc).__name__}: {exc}")
        except BadInput as exc:
            skipped.append(f"{rel}: {exc.what}")
    for kind in registered().values() if new_runs else ():  # what a kind computes from its runs' tables: one pass
        table_metrics = kind.history.table_metrics
        dirs = [archive / r["dir"] for r in new_runs if r["kind"] == kind.name]
        if table_metrics is not None and dirs:
            rows, failed = table_metrics(dirs, pd.DataFrame(new_metrics, columns=METRIC_COLUMNS.names))
            new_metrics += rows
            skipped += [f"metrics of {line}" for line in failed]
    if not quiet:
        for line in skipped:
            print(f"note: skipped {line}", file=sys.stderr)
    if gone or new_runs:
        if gone:
            gone_ids = set(runs.loc[runs["dir"].isin(gone), "run_id"])
            runs = runs[~runs["dir"].isin(gone)]
            metrics = metrics[~metrics["run_id"].isin(gone_ids)]
        if new_runs:
            runs = pd.concat([runs, pd.DataFrame(new_runs)], ignore_index=True) if not runs.empty \
                else pd.DataFrame(new_runs)
        if new_metrics:
            metrics = pd.concat([metrics, pd.DataFrame(new_metrics)], ignore_index=True) if not metrics.empty \
                else pd.DataFrame(new_metrics)
        runs = runs.sort_values(["started_at", "run_id"], na_position="first").reset_index(drop=True)
        try:
            cdir.mkdir(parents=True, exist_ok=True)
            _write_table(runs, RUN_COLUMNS, cdir / "runs.parquet")
            _write_table(metrics, METRIC_COLUMNS, cdir / "metrics.parquet")
        except OSError as exc:  # a read-only archive is still read: the catalog lives in memory
            if not quiet:
                print(f"note: the catalog could not be saved ({exc.strerror or exc}); it is rebuilt on each read",
                      file=sys.stderr)
        runs = _read_back(runs, RUN_COLUMNS)
        metrics = _read_back(metrics, METRIC_COLUMNS)
    if gone or new_runs or not (archive / STAMPS_FILE).is_file():
        _save_stamps(archive, runs, stamps or {}, quiet)
    return Catalog(runs, metrics, skipped)


def _read_back(frame: pd.DataFrame, schema: pa.Schema) -> pd.DataFrame:
    """The frame as a reader of the Parquet file sees it (one set of dtypes either way)."""
    return _arrow(frame, schema).to_pandas()


def add_runs(archive: Path, paths: Iterable[Path], *, allow_unsigned: bool = False
             ) -> tuple[list[Added], list[Refused]]:
    """Every run under ``paths`` into the archive (``harness.history.archive.copy_runs``: each
    copied whole, already there, or refused with its reason), then the catalog brought up to date."""
    added, refused = copy_runs(Path(archive), paths, allow_unsigned=allow_unsigned)
    if any(a.outcome == "added" for a in added):
        refresh(archive)
    return added, refused


@dataclass(frozen=True)
class MachineSummary:
    machine_id: str
    label: str
    runs: int
    kinds: dict[str, int]
    builds: tuple[int, ...]
    first: str | None
    last: str | None


def list_machines(archive: Path) -> list[MachineSummary]:
    """Each machine of the archive with its run counts (from the catalog)."""
    runs = load(archive).runs
    out = []
    for machine_id, group in runs.groupby("machine_id", sort=True):
        builds = sorted({int(b) for b in group["engine_build"].dropna()})
        out.append(MachineSummary(str(machine_id), str(group["machine_label"].iloc[-1]), len(group),
                                  {str(k): int(v) for k, v in group["kind"].value_counts().sort_index().items()},
                                  tuple(builds), group["run_id"].min(), group["run_id"].max()))
    return out
