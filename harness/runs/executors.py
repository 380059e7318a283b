"""How each kind of run is started: the runs layer's table of kinds (``EXECUTORS``).

Every command that starts runs (idle, calibrate, swap, repro, ab, bisect, gate-bench) calls
each kind the same way: ``get_executor(name).prepare(spec, RunOptions, reporter)`` does every
bad-input check before a run directory exists, ``.execute(prepared, reporter)`` measures and
returns the finished ``Run`` (its lifecycle is ``harness/runs/session.py``).  The kinds' facts
are in ``harness/kinds.py``.

Each executor imports its module when it is called, so a command loads only the kind it runs
(``lbench idle`` does not load the claim scenarios).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.errors import BadInput
from harness.kinds import unknown_kind

if TYPE_CHECKING:
    from harness.runs.idle import Reporter
    from harness.store import Run


@dataclass(frozen=True)
class RunOptions:
    """What a command passes to every kind's ``prepare`` besides the spec (None: the default)."""

    llama_server: str | None = None  # the engine binary (path, or a build resolved by the command)
    results: str | None = None  # the results root (--results)
    llama_idle: str | None = None  # idle: the in-process reference binary
    engine_options: dict[str, Any] = field(default_factory=dict)  # idle: engine knobs from the command line
    binary: Any = None  # repro: the resolved engine Binary


@dataclass(frozen=True)
class Executor:
    """Starts runs of one kind (``name``, a key of ``harness.kinds.KINDS``)."""

    name: str

    def spec_class(self) -> type:
        raise NotImplementedError

    def prepare(self, spec: Any, options: RunOptions, reporter: Reporter) -> Any:
        raise NotImplementedError

    def execute(self, prepared: Any, reporter: Reporter, *, extra_manifest: dict | None = None) -> Run:
        raise NotImplementedError


class _Idle(Executor):
    def spec_class(self) -> type:
        from harness.spec import IdleSpec

        return IdleSpec

    def prepare(self, spec: Any, options: RunOptions, reporter: Reporter) -> Any:
        from harness.runs.idle import prepare_idle

        return prepare_idle(spec, llama_server=options.llama_server, results=options.results, reporter=reporter,
                            kind=self.name, llama_idle_path=options.llama_idle, engine_options=options.engine_options)

    def execute(self, prepared: Any, reporter: Reporter, *, extra_manifest: dict | None = None) -> Run:
        from harness.runs.idle import execute_idle

        return execute_idle(prepared, reporter, extra_manifest=extra_manifest)


class _Swap(Executor):
    def spec_class(self) -> type:
        from harness.spec import SwapSpec

        return SwapSpec

    def prepare(self, spec: Any, options: RunOptions, reporter: Reporter) -> Any:
        from harness.runs.swap import prepare_swap

        return prepare_swap(spec, llama_server=options.llama_server, results=options.results, reporter=reporter)

    def execute(self, prepared: Any, reporter: Reporter, *, extra_manifest: dict | None = None) -> Run:
        from harness.runs.swap import execute_swap

        return execute_swap(prepared, reporter)


@dataclass(frozen=True)
class PreparedRepro:
    claims: list
    binary: Any
    results: str | None


class _Repro(Executor):
    def spec_class(self) -> type:
        from harness.repro.claims import ClaimSpec

        return ClaimSpec

    def prepare(self, spec: Any, options: RunOptions, reporter: Reporter) -> Any:
        """``spec``: the claims to check (ClaimSpec list); ``options.binary``: the engine."""
        if options.binary is None:
            raise BadInput("a repro run needs an engine binary", hint="lbench engine info says which is used")
        return PreparedRepro(list(spec), options.binary, options.results)

    def execute(self, prepared: Any, reporter: Reporter, *, extra_manifest: dict | None = None) -> Run:
        from harness.runs.repro import execute_repro

        return execute_repro(prepared.claims, prepared.binary, results=prepared.results, reporter=reporter)


class _GateBench(Executor):
    def spec_class(self) -> type:
        from harness.runs.gate_bench import GateBenchSpec

        return GateBenchSpec

    def prepare(self, spec: Any, options: RunOptions, reporter: Reporter) -> Any:
        """``spec``: a GateBenchSpec (real runs) or a SimulatedGateBenchSpec (``--simulate``)."""
        from harness.runs.gate_bench import prepare_gate_bench

        return prepare_gate_bench(spec, options, reporter)

    def execute(self, prepared: Any, reporter: Reporter, *, extra_manifest: dict | None = None) -> Run:
        from harness.runs.gate_bench import execute_gate_bench

        return execute_gate_bench(prepared, reporter)


class _GateJob(Executor):
    def spec_class(self) -> type:
        from harness.runs.ab import GateJobSpec

        return GateJobSpec

    def prepare(self, spec: Any, options: RunOptions, reporter: Reporter) -> Any:
        """``spec``: a GateJobSpec (both sides' idle specs and binaries, the rounds' config)."""
        from harness.runs.ab import prepare_gate_job

        return prepare_gate_job(spec, options.results, reporter)

    def execute(self, prepared: Any, reporter: Reporter, *, extra_manifest: dict | None = None) -> Run:
        from harness.runs.ab import execute_gate_job

        return execute_gate_job(prepared, reporter).run


EXECUTORS: dict[str, Executor] = {e.name: e for e in (_Idle("idle"), _Idle("calibrate"), _Swap("swap"), _Repro("repro"),
                                                      _GateBench("gate-bench"), _GateJob("ab"))}


def get_executor(name: object, where: str = "") -> Executor:
    """The executor of the kind ``name``; an unknown kind is bad input (exit 2)."""
    executor = EXECUTORS.get(name) if isinstance(name, str) else None
    if executor is None:
        what, hint = unknown_kind(name)
        raise BadInput(what, where=where or None, hint=hint)
    return executor
