"""Claims from the source documents, as declarative specs, and their verdicts.

A spec (``experiments/claims/*.toml``)::

    id = "router-cap"
    claim = "At most models_max children exist at once."
    source = { seed = "000_8a4f772c82ebbd36.txt", statement = "Result: unload completes ..." }
                                     # or document = "reference/llama-server.md"
    engine = "llama-server"          # or "ollama"
    requires = []                    # any of: "metal", "cuda", "not-metal", "ollama"
    scenario = "storm"               # a name from harness.repro.scenarios.SCENARIOS
    [params]                         # handed to the scenario
    models = ["tiny-q8", "tiny-q4", "tiny-f16"]
    models_max = 2
    [[check]]                        # every requirement must hold
    figure = "peak_children"
    op = "<="
    ref = "models_max"               # another figure; or value = 2

Verdicts: ``holds``, ``contradicted`` (the failing requirement and the measured
figures say why), ``not checkable here`` (platform or engine missing, or the
scenario could not set up the situation), ``error`` (the run itself broke).
"""

from __future__ import annotations

import operator
import platform
import shutil
import socket
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import BadInput

CLAIMS_DIR = Path(__file__).resolve().parents[2] / "experiments" / "claims"
OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq,
       "!=": operator.ne}
REQUIREMENTS = ("metal", "cuda", "not-metal", "ollama")
HOLDS, CONTRADICTED, NOT_CHECKABLE, ERROR = "holds", "contradicted", "not checkable here", "error"


@dataclass(frozen=True)
class Requirement:
    figure: str
    op: str
    value: object = None
    ref: str | None = None

    def describe(self) -> str:
        return f"{self.figure} {self.op} {self.ref if self.ref else repr(self.value)}"


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


def load_claim(path: Path) -> ClaimSpec:
    from harness.repro.scenarios import SCENARIOS

    where = str(path)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BadInput(f"cannot read claim spec: {exc}", where=where) from None
    known = {"id", "claim", "source", "scenario", "engine", "requires", "params", "check"}
    missing = {"id", "claim", "source", "scenario"} - set(data)
    if missing:
        raise BadInput(f"claim spec lacks {', '.join(sorted(missing))}", where=where)
    src = data["source"]
    if not isinstance(src, dict) or "statement" not in src or not ({"seed", "document"} & set(src)):
        raise BadInput("claim source needs a statement and a seed (shared/seeds/) or a document (shared/...)",
                       where=where)
    unknown = set(data) - known
    if unknown:
        raise BadInput(f"unknown keys in claim spec: {', '.join(sorted(unknown))}", where=where)
    if data["scenario"] not in SCENARIOS and data["scenario"] != "none":
        raise BadInput(f"unknown scenario {data['scenario']!r}", where=where,
                       hint=f"known: {', '.join(SCENARIOS)}, or 'none' for claims with no experiment here")
    for r in data.get("requires", []):
        if r not in REQUIREMENTS:
            raise BadInput(f"unknown requirement {r!r}", where=where, hint=f"known: {', '.join(REQUIREMENTS)}")
    checks = []
    for c in data.get("check", []):
        if c.get("op") not in OPS or "figure" not in c or ("value" not in c and "ref" not in c):
            raise BadInput(f"bad check {c!r}", where=where, hint="figure, op (<= < >= > == !=), and value or ref")
        checks.append(Requirement(c["figure"], c["op"], c.get("value"), c.get("ref")))
    return ClaimSpec(data["id"], data["claim"], data["source"], data["scenario"], data.get("engine", "llama-server"),
                     list(data.get("requires", [])), dict(data.get("params", {})), checks, path)


def load_claims(selected: list[str] | None = None, directory: Path = CLAIMS_DIR) -> list[ClaimSpec]:
    claims = [load_claim(p) for p in sorted(directory.glob("*.toml"))]
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


def availability(backend: str) -> dict[str, tuple[bool, str]]:
    """Which requirements this host and engine meet, with the reason when not."""
    metal = platform.system() == "Darwin" and platform.machine() == "arm64" and backend == "metal"
    where = f"{platform.system()} {platform.machine()}, engine backend {backend}"
    return {
        "metal": (metal, f"needs macOS on Apple Silicon with a Metal build; this host: {where}"),
        "not-metal": (not metal, f"needs a non-Metal backend; this host: {where}"),
        "cuda": (backend == "cuda", f"needs a CUDA build of llama-server; this host: {where}"),
        "ollama": (_ollama_reachable(), "needs Ollama: no `ollama` on PATH and nothing answers on 127.0.0.1:11434"),
    }


def gate(spec: ClaimSpec, backend: str) -> str | None:
    """Why the claim cannot be checked here, or None when it can."""
    avail = availability(backend)
    for r in spec.requires:
        ok, why = avail[r]
        if not ok:
            return why
    if spec.scenario == "none":
        return "no experiment for this claim can run on this engine yet"
    return None


def judge(spec: ClaimSpec, figures: dict) -> tuple[str, str]:
    """(verdict, reason) from the spec's requirements over the measured figures."""
    if not spec.check:
        return NOT_CHECKABLE, "the spec has no check"
    passed = []
    for req in spec.check:
        if req.figure not in figures or figures[req.figure] is None:
            return ERROR, f"the scenario did not measure {req.figure!r}"
        actual = figures[req.figure]
        if req.ref is not None:
            if req.ref not in figures:
                return ERROR, f"the scenario did not measure {req.ref!r}"
            expected = figures[req.ref]
        else:
            expected = req.value
        try:
            ok = OPS[req.op](actual, expected)
        except TypeError:
            return ERROR, f"cannot compare {actual!r} {req.op} {expected!r}"
        text = f"{req.figure}={actual!r} {req.op} {expected!r}"
        if not ok:
            return CONTRADICTED, f"expected {req.describe()}, measured {text.split(' ', 1)[0]}"
        passed.append(text)
    return HOLDS, "; ".join(passed)
