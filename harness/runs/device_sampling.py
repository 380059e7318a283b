"""Device sampling in an idle run: which probes (before the run directory exists), one sampler per
server cell, and the on/off plan per repetition that measures the sampler's own effect.

``choose`` raises ``BadInput`` (exit 2, nothing written) when a probe asked for is absent,
naming those available.  ``for_cell`` builds the probes of the running server (its PID for
fdinfo and the process probe) and a ``DeviceSampler`` whose rows go to the run's
``device_samples`` table as they are read; ``finish`` stops it and records its cost.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import BadInput
from harness.probes.devices import registry
from harness.probes.devices.sampler import DEFAULT_GUARD_S, DeviceSampler
from harness.spec import IdleSpec
from harness.store import RunWriter

if TYPE_CHECKING:
    from harness.engines.base import RunningServer

CELL_KEYS = ("cell", "model", "setting")


def choose(spec: IdleSpec) -> tuple[dict[str, str], list[str]]:
    """Every source's status and the sources this run samples."""
    value = spec.device_probes.strip().lower()
    if value in registry.OFF:
        return {}, []
    status = registry.describe()
    names = registry.select(value, status)
    if spec.device_interleave and not names:
        have = registry.available(status)
        raise BadInput("--device-interleave needs a device probe, and none is available here",
                       where="--device-interleave", hint=f"available here: {', '.join(have) or 'none'}; "
                       "drop --device-interleave")
    return status, names


def interleave_plan(reps: int, seed: int) -> list[bool]:
    """Sampling on in half the repetitions (the extra one of an odd count on), off in the others, in a
    seeded shuffled order so that drift cannot look like the sampler's effect."""
    plan = [True] * (reps - reps // 2) + [False] * (reps // 2)
    random.Random(f"device-interleave-{seed}").shuffle(plan)
    return plan


def for_cell(prep: Any, server: RunningServer, writer: RunWriter, common: dict, cell: Any, model_path: Path | None = None
             ) -> tuple[DeviceSampler | None, Callable[[int], bool] | None]:
    spec: IdleSpec = prep.spec
    if not prep.device_probes:
        return None, None
    pid = None if server.proc is None else server.proc.pid
    probes = registry.build(prep.device_probes, pid, model_path=model_path)
    cell.device_sampling = {"sources": list(prep.device_probes), "pid": pid,
                            "devices": [f"{p.name}:{p.device}" for p in probes],
                            "interval_s": spec.device_interval_s, "guard_s": DEFAULT_GUARD_S}
    if not probes:
        cell.device_sampling["note"] = "no device to read for this server (no PID, or no device found)"
        return None, None
    meta = {k: common.get(k) for k in CELL_KEYS}

    def emit(row: dict) -> None:
        writer.append({**meta, **row}, table="device_samples")

    sampler = DeviceSampler(probes, emit, interval_s=spec.device_interval_s)
    if not spec.device_interleave:
        return sampler, None
    plan = interleave_plan(spec.reps, spec.seed)
    cell.device_sampling["interleave"] = ["on" if p else "off" for p in plan]
    return sampler, lambda rep: plan[rep]


def finish(sampler: DeviceSampler | None, cell: Any) -> None:
    if sampler is None:
        return
    sampler.join()
    cell.device_sampling["cost"] = sampler.cost()
