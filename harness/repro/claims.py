"""Claims from the source documents, as declarative specs, and their verdicts.

A spec (``experiments/claims/*.toml``)::

    id = "router-cap"
    claim = "At most models_max children exist at once."
    source = { seed = "000_8a4f772c82ebbd36.txt", statement = "Result: unload completes ..." }
                                     # or document = "reference/llama-server.md"; the statement is
                                     # quoted verbatim ("..." marks omitted text); code = "file: function"
    timing = true                    # repeat 3 times (or repeat = N), report intervals
    tested = "..."                   # what the scenario exercises, and
    not_tested = "..."               # what it cannot (shown with the verdict)
    engine = "llama-server"          # or "ollama"
    requires = []                    # any of: "metal", "cuda", "not-metal", "apple-cpu", "cpu",
                                     # "ollama", "proc-events" (the kernel's fork/exit events),
                                     # "mlx" (mlx and mlx-lm with Metal), "metal-residency"
                                     # (llama.cpp's residency sets exist: macOS >= 15, engine SDK >= 15,
                                     # arm64; probes/residency.py), "mlx-residency" (MLX's: mlx >= 0.32.1,
                                     # macOS >= 15)
    scenario = "storm"               # a name from harness.repro.registry.SCENARIOS
    [params]                         # the scenario's typed parameters (its Params dataclass)
    models = ["tiny-q8", "tiny-q4", "tiny-f16"]
    models_max = 2
    [[check]]                        # every requirement must hold
    figure = "peak_children"
    op = "<="
    ref = "models_max"               # another figure; or value = 2
    says = "children alive at once"  # the figure in words, for the reason sentence

Verdicts: ``holds`` (every requirement met in every repetition), ``contradicted``
(a requirement failed in every repetition), ``inconclusive`` (repetitions disagree),
``not checkable here`` with its cause (``platform`` lacks something, ``scenario``
missing, ``setup`` failed: the scenario could not create the situation), ``error``
(the scenario did not measure what the check needs: a harness bug).  Every
requirement is evaluated; reasons are plain sentences.  ``repeat`` (default 3 for
specs with ``timing = true``, else 1) runs the scenario that many times; numeric
figures then carry their mean and a 95% t interval.
"""

from __future__ import annotations

import operator
import platform
import shutil
import socket
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness import resources, shell, typed_toml
from harness.engines import registry, server_policy
from harness.errors import BadInput
from harness.toml_input import read_toml
from harness.repro.registry import SCENARIOS
from harness.probes.proc_events import available
from harness.probes.macos import read_paravirtual_reason
from harness.probes import residency
from harness.probes.residency import macos_version, version_tuple
from harness.repro.mlx_scenarios import residency_lines_possible

OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq,
       "!=": operator.ne}
REQUIREMENTS = ("metal", "cuda", "not-metal", "apple-cpu", "cpu", "ollama", "proc-events", "mlx", "metal-residency",
                "mlx-residency")
HOLDS, CONTRADICTED, NOT_CHECKABLE, ERROR = "holds", "contradicted", "not checkable here", "error"
INCONCLUSIVE = "inconclusive"
# why a claim is not checkable here
PLATFORM, SCENARIO_MISSING, SETUP_FAILED = "platform", "scenario", "setup"
OP_WORDS = {"<=": "at most", "<": "below", ">=": "at least", ">": "above", "==": "", "!=": "not"}
ENGINES = ("llama-server", "ollama", "mlx")  # the engines claim scenarios exist for (a subset of engines.registry)


@dataclass(frozen=True)
class Requirement:
    figure: str
    op: str
    value: object = None
    ref: str | None = None
    says: str | None = None  # what the figure is, in words ("children alive at once")
    undecided: bool = False  # failing means "the data cannot decide" (inconclusive), not "contradicted"

    def describe(self) -> str:
        return f"{self.figure} {self.op} {self.ref if self.ref else repr(self.value)}"

    def sentence(self, actual: object, expected: object, ok: bool) -> str:
        """"children alive at once (peak_children) was 2, expected at most 2 (models_max): met"."""
        what = f"{self.says} ({self.figure})" if self.says else self.figure
        exp = f"{OP_WORDS[self.op] + ' ' if OP_WORDS[self.op] else ''}{_fmt(expected)}"
        if self.ref:
            exp += f" ({self.ref})"
        return f"{what} was {_fmt(actual)}, expected {exp}: {'met' if ok else 'NOT met'}"


def _fmt(x: object) -> str:
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.4g}"
    return "none" if x is None else str(x)


@dataclass
class CheckResult:
    requirement: Requirement
    actual: object
    expected: object
    ok: bool | None  # None: could not be evaluated
    sentence: str


@dataclass
class ClaimSpec:
    id: str
    claim: str
    source: dict
    scenario: str
    engine: str = "llama-server"
    requires: list[str] = field(default_factory=list)
    params: dict = field(default_factory=dict)
    check: list[Requirement] = field(default_factory=list)
    path: Path | None = None
    timing: bool = False
    repeat: int = 1
    recipe_note: str = ""


MAX_REPEAT = 1000


@dataclass(frozen=True)
class _ClaimFile:
    """A claim spec file's keys and their types (read by harness/typed_toml.py)."""
    id: str
    claim: str
    source: dict[str, str]
    scenario: str
    engine: str = "llama-server"
    requires: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    check: list[dict[str, Any]] = field(default_factory=list)
    timing: bool = False
    repeat: int | None = None  # default: 3 with timing, else 1
    tested: str | None = None
    not_tested: str | None = None


@dataclass(frozen=True)
class _CheckTable:
    """One ``[[check]]`` table."""
    figure: str
    op: str
    value: Any = None
    ref: str | None = None
    says: str | None = None
    undecided: bool = False


_FIX = "fix the value in the claim spec (TOML)"


def check_params(params: dict[str, Any], where: str) -> None:
    """The parameters a scenario receives, as far as lbench can judge them without running it:
    environment variables (``reserved``) are variable names and never ones lbench reserves;
    extra server arguments and variables are on the allow-list (engines/server_policy.py)."""
    for table in ("reserved", "env"):  # env: the router's environment (e.g. LLAMA_SERVER_DEBUG_FAKE_TIMING)
        env = typed_toml.value(params.get(table, {}), dict[str, str | int | float], f"params.{table}", where, _FIX)
        for k in env:
            try:
                shell.env_name(k)
            except ValueError:
                raise BadInput(f"params.{table}: not an environment variable name: {k!r}", where=where) from None
        server_policy.check_env(env, f"{where}: params.{table}")
    for key in ("server_args", "extra_args"):
        if key in params:
            server_policy.check_args(typed_toml.value(params[key], list[str], f"params.{key}", where, _FIX),
                                f"{where}: params.{key}")
    if "models" in params:
        typed_toml.value(params["models"], list[str], "params.models", where, _FIX)


def _requirement(table: object, where: str) -> Requirement:
    bad = BadInput(f"bad check {table!r}"[:300], where=where,
                   hint="figure (a string), op (<= < >= > == !=), and value or ref (a figure's name)")
    if not isinstance(table, dict) or ("value" not in table and "ref" not in table):
        raise bad
    try:
        c = typed_toml.load(_CheckTable, table, where, prefix="check.", fix=_FIX)
    except BadInput as exc:
        raise bad from exc
    if c.op not in OPS:
        raise bad
    return Requirement(c.figure, c.op, c.value, c.ref, c.says, c.undecided)


def load_claim(path: Path) -> ClaimSpec:
    where = str(path)
    spec = typed_toml.load(_ClaimFile, read_toml(path, "claim spec"), where, fix=_FIX)
    src = spec.source
    if "statement" not in src or not ({"seed", "document"} & set(src)):
        raise BadInput("claim source needs a statement and a seed (shared/seeds/) or a document (shared/...)",
                       where=where)
    if spec.scenario not in SCENARIOS and spec.scenario != "none":
        raise BadInput(f"unknown scenario {spec.scenario!r}", where=where,
                       hint=f"known: {', '.join(SCENARIOS)}, or 'none' for claims with no experiment here")
    for r in spec.requires:
        if r not in REQUIREMENTS:
            raise BadInput(f"unknown requirement {r!r}", where=where, hint=f"known: {', '.join(REQUIREMENTS)}")
    check_params(spec.params, where)
    checks = [_requirement(c, where) for c in spec.check]
    registry.get(spec.engine, where)
    if spec.engine not in ENGINES:
        raise BadInput(f"unknown engine {spec.engine!r}", where=where, hint=f"known: {', '.join(ENGINES)}")
    repeat = (3 if spec.timing else 1) if spec.repeat is None else spec.repeat
    if not 1 <= repeat <= MAX_REPEAT:
        raise BadInput(f"repeat must be an integer from 1 to {MAX_REPEAT}, got {repeat}", where=where)
    note = ""
    if spec.tested or spec.not_tested:
        note = f"Tested: {spec.tested or '-'} Not tested: {spec.not_tested or '-'}"
    if spec.scenario != "none":  # names and types of [params] checked now, before anything runs
        SCENARIOS[spec.scenario].validate(spec.params, where=f"{where}: [params]")
    return ClaimSpec(spec.id, spec.claim, dict(src), spec.scenario, spec.engine, list(spec.requires),
                     dict(spec.params), checks, path, spec.timing, repeat, note)


def load_claims(selected: list[str] | None = None, directory: Path | None = None) -> list[ClaimSpec]:
    directory = directory or resources.claims_dir()
    claims = [load_claim(p) for p in sorted(directory.glob("*.toml")) if p.name != "code_paths.toml"]
    ids = [c.id for c in claims]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise BadInput(f"duplicate claim ids: {', '.join(sorted(dupes))}", where=str(directory))
    if not selected:
        return claims
    chosen = []
    for s in selected:
        match = [c for c in claims if c.id == s] or [c for c in claims if c.id.startswith(s)]
        if not match:
            raise BadInput(f"unknown claim {s!r}", where=str(directory), hint="known: " + ", ".join(ids))
        chosen += [m for m in match if m not in chosen]
    return chosen


def _ollama_reachable() -> bool:
    if shutil.which("ollama"):
        return True
    try:
        with socket.create_connection(("127.0.0.1", 11434), timeout=0.3):
            return True
    except OSError:
        return False


@lru_cache(maxsize=1)
def _mlx_metal() -> tuple[bool, str]:
    """mlx and mlx-lm importable and mlx's Metal backend available (Apple Silicon)."""
    where = f"this host: {platform.system()} {platform.machine()}"
    try:
        import mlx.core as mx
        import mlx_lm  # noqa: F401
    except ImportError:
        return False, f"needs mlx and mlx-lm with Metal on Apple Silicon (pip install 'lbench[mlx]'); {where}"
    try:
        ok = bool(mx.metal.is_available())
    except Exception as exc:  # mlx[cpu] on Linux has no metal module to ask
        return False, f"needs mlx with Metal on Apple Silicon ({exc}); {where}"
    return ok, "" if ok else f"needs mlx with Metal on Apple Silicon (mlx has no Metal here); {where}"


@lru_cache(maxsize=1)
def _proc_events() -> tuple[bool, str]:
    return available()


class _Lazy(dict):
    """A dict whose values are computed on first access (a probe that forks a process runs
    only for a claim that needs it)."""

    def __init__(self, makers: dict) -> None:
        super().__init__()
        self.makers = makers

    def __missing__(self, key: str) -> tuple[bool, str]:
        self[key] = value = self.makers[key]()
        return value


def availability(backend: str, binary: Path | None = None) -> dict[str, tuple[bool, str]]:
    """Which requirements this host and engine meet, with the reason when not.  Probes that
    touch the host (Ollama's port, the kernel's process events) run on first access only."""
    metal = platform.system() == "Darwin" and residency.apple_silicon() and backend == "metal"
    where = f"{platform.system()} {platform.machine()}, engine backend {backend}"
    paravirtual = _paravirtual() if metal else None
    eager = {
        "metal": (metal and paravirtual is None,
                  paravirtual or f"needs macOS on Apple Silicon with a Metal build; this host: {where}"),
        "not-metal": (not metal, f"needs a non-Metal backend; this host: {where}"),
        "cuda": (backend == "cuda", f"needs a CUDA build of llama-server; this host: {where}"),
        "cpu": (backend == "cpu", f"needs a CPU-only build of llama-server; this host: {where}"),
        "apple-cpu": (platform.system() == "Darwin" and platform.machine() == "arm64" and backend == "cpu",
                      f"needs Apple Silicon with a CPU-only build (the seed compares Apple's CPU and GPU "
                      f"backends); this host: {where}"),
    }
    return _Lazy({
        **{k: (lambda v=v: v) for k, v in eager.items()},
        "ollama": lambda: (_ollama_reachable(),
                           "needs Ollama: no `ollama` on PATH and nothing answers on 127.0.0.1:11434"),
        "proc-events": lambda: (_proc_events()[0], f"needs the kernel's process events: {_proc_events()[1]}"),
        "mlx": lambda: (False, _paravirtual()) if _paravirtual() else _mlx_metal(),
        # llama.cpp's residency sets: decided where idle cells decide them (probes/residency.py)
        "metal-residency": lambda: residency.claim_gate_here(binary) if metal and binary is not None else
        (False, "llama.cpp's Metal residency sets need a Metal engine on macOS"),
        "mlx-residency": _mlx_residency,
    })


def _mlx_residency() -> tuple[bool, str]:
    """MLX's residency sets and their ``[residency]`` lines: mlx >= 0.32.1 (mlx/backend/metal/resident.cpp)
    on macOS >= 15 (resident.cpp: Metal3 + macOS 15)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        mlx = version("mlx")
    except PackageNotFoundError:
        return False, "needs mlx (pip install 'lbench[mlx]')"
    if not residency_lines_possible(mlx):
        return False, f"mlx {mlx} has no residency sets' [residency] lines (they first ship in mlx 0.32.1)"
    macos = macos_version()
    if (version_tuple(macos) or (0,)) < (15,):
        return False, f"MLX creates residency sets on macOS >= 15 only; this host: macOS {macos or 'unknown'}"
    return True, f"mlx {mlx} on macOS {macos}"


@lru_cache(maxsize=1)
def _paravirtual() -> str | None:
    """Why Metal/MLX claims are not checkable on a virtual Mac (None on a real one, or off macOS)."""
    return read_paravirtual_reason()


def gate_cause(spec: ClaimSpec, backend: str, binary: Path | None = None) -> tuple[str, str] | None:
    """(cause, sentence) why the claim cannot be checked here, or None when it can (``binary``: the engine,
    for the requirements its build decides)."""
    avail = availability(backend, binary)
    # an engine that is itself a requirement (a service the host must offer, such as Ollama) is needed
    needs = list(dict.fromkeys(list(spec.requires) + ([spec.engine] if spec.engine in REQUIREMENTS else [])))
    for r in needs:
        ok, why = avail[r]
        if not ok:
            return PLATFORM, f"platform lacks {r}: {why}"
    if spec.scenario == "none":
        return SCENARIO_MISSING, "scenario missing: no experiment for this claim exists yet"
    return None


def gate(spec: ClaimSpec, backend: str, binary: Path | None = None) -> str | None:
    """Why the claim cannot be checked here, or None when it can."""
    g = gate_cause(spec, backend, binary)
    return g[1] if g else None


def evaluate(spec: ClaimSpec, figures: dict) -> list[CheckResult]:
    """Every requirement, evaluated (none stops the others)."""
    out = []
    for req in spec.check:
        actual = figures.get(req.figure)
        expected = figures.get(req.ref) if req.ref is not None else req.value
        if actual is None or (req.ref is not None and req.ref not in figures):
            missing = req.figure if actual is None else req.ref
            out.append(CheckResult(req, actual, expected, None, f"the scenario did not measure {missing!r}"))
            continue
        try:
            ok = bool(OPS[req.op](actual, expected))  # type: ignore[arg-type]  # TypeError below
        except TypeError:
            out.append(CheckResult(req, actual, expected, None, f"cannot compare {actual!r} {req.op} {expected!r}"))
            continue
        out.append(CheckResult(req, actual, expected, ok, req.sentence(actual, expected, ok)))
    return out


def judge(spec: ClaimSpec, figures: dict) -> tuple[str, str]:
    """(verdict, reason) from the spec's requirements over one repetition's figures."""
    return judge_repeats(spec, [figures])


def judge_repeats(spec: ClaimSpec, reps: list[dict]) -> tuple[str, str]:
    """(verdict, reason) over one or more repetitions: holds when every requirement is met in
    every repetition, contradicted when some requirement fails in all of them, else inconclusive."""
    if not spec.check:
        return NOT_CHECKABLE, "the spec has no check"
    results = [evaluate(spec, f) for f in reps]
    broken = [r for rs in results for r in rs if r.ok is None]
    if broken:
        return ERROR, "; ".join(dict.fromkeys(r.sentence for r in broken))
    n = len(reps)
    failing_always = [i for i in range(len(spec.check))
                      if all(not rs[i].ok for rs in results) and not spec.check[i].undecided]
    failing_some = [i for i in range(len(spec.check)) if any(not rs[i].ok for rs in results)]
    sentences = []
    for i, req in enumerate(spec.check):
        if n == 1:
            sentences.append(results[0][i].sentence)
        else:
            met = sum(1 for rs in results if rs[i].ok)
            sentences.append(f"{results[-1][i].sentence.rsplit(':', 1)[0].rsplit(' was ', 1)[0]} "
                             f"met in {met} of {n} repetitions{_interval_text(req.figure, reps)}")
    reason = "; ".join(sentences) + "."
    if failing_always:
        return CONTRADICTED, reason
    if failing_some:
        return INCONCLUSIVE, reason
    return HOLDS, reason


def interval(values: list[float]) -> tuple[float, float, float] | None:
    """Mean and 95% t interval of repeated measurements (None for fewer than 2)."""
    import statistics

    from scipy import stats as st

    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    half = st.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
    return mean, mean - half, mean + half


def _interval_text(figure: str, reps: list[dict]) -> str:
    vals = [f.get(figure) for f in reps]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        return f" (values: {', '.join(_fmt(v) for v in vals)})"
    iv = interval([float(v) for v in vals if isinstance(v, (int, float))])
    if iv is None:
        return ""
    return f" (mean {iv[0]:.4g}, 95% interval {iv[1]:.4g} to {iv[2]:.4g}, values {', '.join(_fmt(v) for v in vals)})"


def summarize_repeats(reps: list[dict]) -> dict:
    """One figures dict: the last repetition's values plus, for numeric figures, per-repetition
    lists and the 95% interval under ``<name>_reps`` / ``<name>_ci``."""
    if len(reps) == 1:
        return dict(reps[0])
    out = dict(reps[-1])
    for k in reps[-1]:
        vals = [r.get(k) for r in reps]
        out[f"{k}_reps"] = vals
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            iv = interval([float(v) for v in vals if isinstance(v, (int, float))])
            if iv:
                out[f"{k}_ci"] = [round(x, 6) for x in iv]
    return out
