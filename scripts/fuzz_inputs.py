"""Fuzz lbench's untrusted inputs and print how many cases were tried per class (issue 26, class 7).

    python scripts/fuzz_inputs.py [-n CASES_PER_CLASS] [--seed S] [--only CLASS]

Classes: idle specs, swap specs, claim files (TOML built from the real keys with random nested
values), raw bytes read as each of them, extra server arguments (the loopback rule), and shell
words (a random string through ``shell.quote`` and ``shell.comment``, then run by bash: the word
must come back exactly, the comment must stay one comment).  A case ends in *accepted*,
*refused* (BadInput, exit 2) or *crashed* (any other exception: a bug).  Prints one row per
class with the counts and the time per case; exits 1 when anything crashed.  No server is
started and nothing is written outside a temporary directory.  It is a benchmark, not a test:
the figures are printed, never asserted (the test suite holds the hypothesis versions).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import shell  # noqa: E402
from harness.engines import reserved  # noqa: E402
from harness.errors import BadInput  # noqa: E402
from harness.repro.claims import load_claim  # noqa: E402
from harness.spec import IdleSpec, SwapSpec, load_spec, load_swap_spec  # noqa: E402

NASTY = ["", "'", '"', "$(touch pwned)", "`touch pwned`", ";", "\n", "\r", "\x00", "--host", "-m", "[", "]", "=",
         "\\", "nan", "inf", "ÿ", "\u2028", "../", "/etc/passwd", "a" * 300]


def rand_scalar(rng: random.Random):
    kind = rng.randrange(6)
    if kind == 0:
        return rng.choice([True, False])
    if kind == 1:
        return rng.choice([0, -1, 1, 2**31, 2**63, -(2**70), rng.randrange(-1000, 1000)])
    if kind == 2:
        return rng.choice([0.0, -0.5, 1e308, math.nan, math.inf, -math.inf, rng.random() * 100])
    return rng.choice(NASTY) + "".join(rng.choice("abc01.:,-_ ") for _ in range(rng.randrange(6)))


def rand_value(rng: random.Random, depth: int = 0):
    roll = rng.random()
    if depth < 3 and roll < 0.2:
        return [rand_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if depth < 3 and roll < 0.3:
        return {str(rand_scalar(rng))[:8] or "k": rand_value(rng, depth + 1) for _ in range(rng.randrange(3))}
    return rand_scalar(rng)


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(x)}" for k, x in v.items()) + "}"


def spec_text(rng: random.Random, keys: list[str], section: str | None, base: dict | None = None) -> str:
    table = dict(base or {})
    for _ in range(rng.randrange(1, 6)):
        table[rng.choice(keys + ["junk"])] = rand_value(rng)
    lines = [f"[{section}]"] if section and rng.random() < 0.5 else []
    return "\n".join(lines + [f"{json.dumps(k)} = {toml_value(v)}" for k, v in table.items()]) + "\n"


CLAIM_KEYS = ["id", "claim", "source", "scenario", "engine", "requires", "params", "check", "timing", "repeat",
              "tested", "not_tested"]
CLAIM_BASE = {"id": "c", "claim": "x", "source": {"seed": "s.txt", "statement": "s"}, "scenario": "storm"}


def case_file(tmp: Path, loader, text: str | bytes) -> str:
    path = tmp / "case.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    try:
        loader(path)
    except BadInput:
        return "refused"
    return "accepted"


def case_args(rng: random.Random) -> str:
    args = [rng.choice(NASTY + ["--threads", "4", "--ho", "--port=1", "--models_preset", "-hf", "--mmproj"])
            + ("=" + rng.choice(NASTY) if rng.random() < 0.2 else "") for _ in range(rng.randrange(1, 5))]
    try:
        reserved.check_args(args, "fuzz")
    except BadInput:
        if not any(reserved.reserved_flag(a) for a in args):
            raise AssertionError(f"refused without a reserved flag: {args!r}")
        return "refused"
    if any(a.split("=", 1)[0] in reserved.RESERVED_FLAGS for a in args):
        raise AssertionError(f"a reserved flag passed: {args!r}")
    return "accepted"


def case_shell(rng: random.Random, tmp: Path) -> str:
    text = "".join(rng.choice(NASTY + list("ab $'\"`\\;&|<>(){}*?!#~\t")) for _ in range(rng.randrange(1, 8)))
    text = text.replace("\x00", "")  # a shell word cannot hold NUL (argv cannot either)
    script = f"{shell.comment(text)}\nprintf '%s' {shell.quote(text)}\n"
    done = subprocess.run(["bash", "-c", script], cwd=tmp, capture_output=True, timeout=30)
    if done.stdout.decode(errors="surrogateescape") != text or (tmp / "pwned").exists():
        raise AssertionError(f"shell word changed or ran: {text!r} -> {done.stdout!r}")
    return "accepted"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=300, help="cases per class (default 300)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default=None, help="one class: idle-spec, swap-spec, claim, bytes, server-args, shell")
    a = ap.parse_args()
    if a.n < 1:
        print("-n must be >= 1", file=sys.stderr)
        return 2
    rng = random.Random(a.seed)
    idle_keys, swap_keys = list(IdleSpec.__dataclass_fields__), list(SwapSpec.__dataclass_fields__)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        classes = {
            "idle-spec": lambda: case_file(tmp, load_spec, spec_text(rng, idle_keys, "idle")),
            "swap-spec": lambda: case_file(tmp, load_swap_spec, spec_text(rng, swap_keys, "swap")),
            "claim": lambda: case_file(tmp, load_claim, spec_text(rng, CLAIM_KEYS, None, CLAIM_BASE)),
            "bytes": lambda: case_file(tmp, rng.choice([load_spec, load_swap_spec, load_claim]),
                                       bytes(rng.randrange(256) for _ in range(rng.randrange(200)))),
            "server-args": lambda: case_args(rng),
            "shell": lambda: case_shell(rng, tmp),
        }
        if a.only and a.only not in classes:
            print(f"unknown class {a.only!r}; known: {', '.join(classes)}", file=sys.stderr)
            return 2
        print(f"{'class':<12} {'tried':>6} {'accepted':>9} {'refused':>8} {'crashed':>8} {'ms/case':>8}")
        crashed_any = False
        for name, case in classes.items():
            if a.only and name != a.only:
                continue
            counts = {"accepted": 0, "refused": 0, "crashed": 0}
            first_crash = None
            t0 = time.perf_counter()
            for _ in range(a.n):
                try:
                    counts[case()] += 1
                except Exception:
                    counts["crashed"] += 1
                    first_crash = first_crash or traceback.format_exc(limit=3)
            ms = (time.perf_counter() - t0) * 1000 / a.n
            print(f"{name:<12} {a.n:>6} {counts['accepted']:>9} {counts['refused']:>8} {counts['crashed']:>8} {ms:>8.2f}")
            if first_crash:
                crashed_any = True
                print(f"  first crash in {name}:\n{first_crash}", file=sys.stderr)
    return 1 if crashed_any else 0


if __name__ == "__main__":
    sys.exit(main())
