"""One run's lifecycle, the same for every kind: manifest, run quality, signals, failure, finish,
analysis.  Executors only measure.

    with RunSession(results_root, "swap", {"config": ..., "engine": ...}, reporter) as session:
        session.writer.append(row, table="requests")   # observations, as they are measured
        session.fail("the server died")                # the run ends failed, with the reason
    run = session.run                                   # the finished run, analysis.json written

On entering: the run directory and its manifest (status ``running``, host facts, quality
snapshot before).  On leaving normally: the quality snapshot after and its warnings (for every
kind), status ``complete`` or ``failed`` with every reason given, Parquet copies, the final
manifest, then ``analysis.json``.  On Ctrl-C/SIGTERM (KeyboardInterrupt): status
``interrupted``; on any other exception: ``failed`` with the exception; both re-raised after
the manifest is final, so nothing measured is lost and the caller's cleanup (servers) runs.

The end of a run (quality snapshot, Parquet copies, final manifest, analysis, signature) is shielded
from SIGINT and SIGTERM: a signal received then is held until the manifest is final, then delivered
(Ctrl-C after the last sample stops the command once the run has ended ``complete``, exit 130; a
second one during an interrupted run's end changes nothing).  The manifest is never left
``running`` by a signal; a run whose process was SIGKILLed reads ``abandoned`` (harness/record.py).
``LBENCH_TEST_SIGNAL_AT_END=SIGINT|SIGTERM`` (tests only) sends that signal to this process as the
end phase starts and again before the final manifest is written.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from harness.attest import can_sign, sign_run
from harness.history import INSTALL_EXTRA
from harness.probes.host import host_facts
from harness.record import fingerprint_of
from harness.runs import quality
from harness.store import open_run, RunWriter
from harness.analysis.persisted import analyze_finished
from harness.probes.sleepwatch import PowerAssertion

if TYPE_CHECKING:
    from harness.store import Run

INTERRUPTED = "stopped by the user (SIGINT/SIGTERM)"
SHIELDED = (signal.SIGINT, signal.SIGTERM)
TEST_SIGNAL = "LBENCH_TEST_SIGNAL_AT_END"  # tests drive a signal into the end phase deterministically


class SignalShield:
    """SIGINT and SIGTERM held while a block runs (Python runs signal handlers in the main thread
    only, so a held signal cannot strike from another thread either); ``pending`` lists them, and
    ``deliver()`` sends the first again once the previous handlers are back."""

    def __init__(self) -> None:
        self.pending: list[int] = []
        self._saved: dict[int, Any] = {}

    def __enter__(self) -> SignalShield:
        if threading.current_thread() is threading.main_thread():
            for sig in SHIELDED:
                if sig not in self._saved:  # entered again after a signal cut the first try short
                    self._saved[sig] = signal.getsignal(sig)
                signal.signal(sig, self._hold)
        return self

    def _hold(self, signum: int, frame: object) -> None:
        self.pending.append(signum)

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)
        self._saved.clear()

    def deliver(self) -> None:
        """The first held signal, to this process's own handler (Ctrl-C: KeyboardInterrupt here)."""
        if self.pending:
            sig, self.pending = self.pending[0], []
            signal.raise_signal(sig)


def _test_signal() -> None:
    name = os.environ.get(TEST_SIGNAL)
    if name in ("SIGINT", "SIGTERM"):
        os.kill(os.getpid(), getattr(signal, name))


class Messages(Protocol):
    """What the session needs of a reporter (an executor's ``Reporter`` is one)."""

    def message(self, text: str) -> None: ...


def _host() -> dict:
    """The host facts a manifest keeps, with the machine's fingerprint (as history groups runs, schema 2)."""
    facts = host_facts()
    facts["fingerprint"] = fingerprint_of(facts).as_dict()
    return facts


class RunSession:
    def __init__(self, results_root: Path, kind: str, manifest: dict[str, Any], reporter: Messages | None = None,
                 *, quality_samples: Callable[[RunWriter], Any] | None = None, announce: str = ""):
        self.results_root = Path(results_root)
        self.kind = kind
        self.sections = manifest
        self.reporter = reporter
        self.quality_samples = quality_samples  # the measured rows the quality checks read (idle: samples)
        self.announce = announce
        self.failures: list[str] = []
        self.writer: RunWriter
        self.run: Run | None = None
        self.analysis_error: str | None = None
        self._quality_before: dict = {}

    # ---- the lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> RunSession:
        self._quality_before = quality.snapshot()
        self._power = PowerAssertion(os.getpid()).acquire()  # macOS: no idle sleep while the run lasts
        self.writer = RunWriter(self.results_root, self.kind, {
            "host": _host(), **self.sections,
            "quality": {"before": self._quality_before, "after": None, "warnings": []},
            "power_assertion": self._power.as_dict()})
        try:
            self.message(f"run {self.writer.run_id} -> {self.writer.dir}{self.announce}")
        except BaseException:  # a Ctrl-C here: the run directory exists, so it ends honestly too
            self.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> Literal[False]:
        shield = SignalShield()
        try:
            shield.__enter__()
        except KeyboardInterrupt:  # the signal came between the run's last step and the shield
            exc_type, exc = KeyboardInterrupt, None
            shield.__enter__()
        try:
            _test_signal()
            if exc_type is None:
                self._finish("failed" if self.failures else "complete", "; ".join(self.failures) or None)
            elif issubclass(exc_type, KeyboardInterrupt):
                self._finish("interrupted", INTERRUPTED)
            else:
                self._finish("failed", f"{exc_type.__name__}: {exc}")
        finally:
            shield.__exit__()
        if exc_type is None:
            shield.deliver()  # the run has ended; now the signal stops the command (exit 130)
        elif issubclass(exc_type, KeyboardInterrupt) and exc is None:
            raise KeyboardInterrupt  # the one that arrived before the shield
        return False

    def _finish(self, status: str, reason: str | None) -> None:
        self._power.release()
        try:
            after = quality.snapshot() if status != "interrupted" else None
            samples = self.quality_samples(self.writer) if self.quality_samples and after is not None else None
            warnings = quality.assess(self._quality_before, after, samples) if after is not None else []
            self.writer.manifest["quality"] = {"before": self._quality_before, "after": after, "warnings": warnings}
        except Exception as exc:  # the quality checks never sink a run
            self.writer.manifest["quality"]["error"] = f"{type(exc).__name__}: {exc}"
        _test_signal()
        try:
            self.writer.finish(status, reason)
        finally:
            self._analyze()
            self._sign()

    def _sign(self) -> None:
        """signature.json: this runner vouches for the run's files (harness/attest.py); a run that
        cannot be signed is kept as it is, said once."""
        if not can_sign():
            self.message(f"the run is unsigned: signing comes with the history extra ({INSTALL_EXTRA}; then "
                         "lbench history sign RUN_DIR signs it)")
            return
        try:
            sign_run(self.writer.dir)
            self.writer.signed = True
        except Exception as exc:  # noqa: BLE001 - the run's data is what matters; signing never sinks it
            self.message(f"the run was not signed ({type(exc).__name__}: {exc}); a history archive refuses it "
                         "unless added with --allow-unsigned")

    def _analyze(self) -> None:
        self.run = open_run(self.writer.dir, self.results_root)
        self.analysis_error = analyze_finished(self.run)  # analysis.json, read by the CLI, report and evidence
        if self.analysis_error:
            self.message(f"analysis failed ({self.analysis_error}); the samples are kept")

    # ---- during the run ------------------------------------------------------------------------
    def fail(self, reason: str) -> None:
        """The run goes on (or ends) but will finish ``failed``, with this reason."""
        self.failures.append(reason)

    def update(self, **sections: Any) -> None:
        """Add or replace manifest sections now (the router's facts once it is up, ...)."""
        self.writer.manifest.update(sections)
        self.writer.save_manifest()

    def message(self, text: str) -> None:
        if self.reporter is not None:
            self.reporter.message(text)

    @property
    def dir(self) -> Path:
        return self.writer.dir

    @property
    def run_id(self) -> str:
        return self.writer.run_id
