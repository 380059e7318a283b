"""Fuzz lbench's untrusted inputs and print how many cases were tried per class (issue 26, class 7).

    python scripts/fuzz_inputs.py [-n CASES_PER_CLASS] [--seed S] [--only CLASS]

Classes: idle specs, swap specs, claim files (TOML built from the real keys with random nested
values), raw bytes read as each of them, extra server arguments (the loopback rule), shell
words (a random string through ``shell.quote`` and ``shell.comment``, then run by bash: the word
must come back exactly, the comment must stay one comment), archive (a signed run in the store's
format, mutated: a table of random rows and types, a manifest or signature changed, files added or
removed, then ``history add``: an accepted run must be signed by the trusted key with its tables
in bounds, and a query over the whole archive must still work), and query (statements built from
file, URL, extension, setting and recursion calls with hostile arguments, run on the archive's
locked connection with a 2 s interrupt: an accepted one must have read nothing outside the archive).  A case ends in *accepted*,
*refused* (BadInput, exit 2) or *crashed* (any other exception: a bug).  Prints one row per
class with the counts and the time per case; exits 1 when anything crashed.  No server is
started and nothing is written outside a temporary directory.  It is a benchmark, not a test:
the figures are printed, never asserted (the test suite holds the hypothesis versions).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import shell  # noqa: E402
from harness.engines import reserved, server_policy  # noqa: E402
from harness.errors import BadInput  # noqa: E402
from harness.repro.claims import load_claim  # noqa: E402
from harness.spec import IdleSpec, SwapSpec, load_spec, load_swap_spec  # noqa: E402
from harness import kinds  # noqa: E402

kinds.install()  # the archive's catalog files runs by their kind (harness/kinds/), as the lbench command does

ARCHIVE_FUNCS = ["read_text", "read_csv", "read_blob", "glob", "read_parquet", "read_json", "read_csv_auto"]
ARCHIVE_PATHS = ["/etc/passwd", "/etc/hostname", "~/.ssh/id_rsa", "../../etc/passwd", "/home/**", "*",
                 "https://example.com/x.csv", "s3://bucket/x.parquet", "/proc/self/environ", ".catalog/runs.parquet"]
STATEMENTS = ["SET enable_external_access = true", "INSTALL httpfs", "LOAD httpfs", "ATTACH '/tmp/x.db'",
              "COPY runs TO '/tmp/x.csv'", "PRAGMA database_list", "CREATE TABLE t AS SELECT 1", "DROP VIEW runs",
              "SELECT * FROM duckdb_settings()", "CALL pragma_version()", "EXPORT DATABASE '/tmp/x'"]

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
    # the allow-list (engines/server_policy.py): accepted only when every flag is a measurement flag
    flags = [server_policy.flag_name(a) for a in args]
    try:
        server_policy.check_args(args, "fuzz")
    except BadInput:
        if all(f is None or f in server_policy.MEASUREMENT_FLAGS for f in flags):
            raise AssertionError(f"refused with only measurement flags: {args!r}")
        return "refused"
    if any(f is not None and f not in server_policy.MEASUREMENT_FLAGS for f in flags):
        raise AssertionError(f"a flag off the allow-list passed: {args!r}")
    return "accepted"


def case_shell(rng: random.Random, tmp: Path) -> str:
    text = "".join(rng.choice(NASTY + list("ab $'\"`\\;&|<>(){}*?!#~\t")) for _ in range(rng.randrange(1, 8)))
    text = text.replace("\x00", "")  # a shell word cannot hold NUL (argv cannot either)
    script = f"{shell.comment(text)}\nprintf '%s' {shell.quote(text)}\n"
    done = subprocess.run(["bash", "-c", script], cwd=tmp, capture_output=True, timeout=30)
    if done.stdout.decode(errors="surrogateescape") != text or (tmp / "pwned").exists():
        raise AssertionError(f"shell word changed or ran: {text!r} -> {done.stdout!r}")
    return "accepted"


def make_run(root: Path, n: int) -> Path:
    """A small idle run in the store's real format (harness.store.RunWriter), signed."""
    from harness.attest import sign_run
    from harness.store import RunWriter

    w = RunWriter(root, "idle", {
        "started_at": f"2026-01-01T00:{n % 60:02d}:00.000+00:00", "config": {"seed": 0},
        "models": [{"label": "m", "synthetic": True, "sha256": "cd" * 32}],
        "host": {"cpu_model": "FuzzCPU", "os": "Linux", "cpu_logical": 2}, "engine": {"build_number": 100},
        "cells": []})
    for rep in range(4):
        w.append({"model": "m", "setting": "keep-alive=default", "phase": "measure", "rep": rep,
                  "pause_requested_s": 0.0, "pause_actual_s": 0.0, "latency_ms": 20.0 + rep, "http_status": 200,
                  "error": None})
    w.finish("complete")
    sign_run(w.dir)
    return w.dir


def mutate_run(rng: random.Random, run: Path) -> None:
    """One hostile change to a run directory, re-signed or not."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from harness.attest import sign_run

    roll = rng.randrange(7)
    if roll == 0:  # a table of random declared size and column types
        rows = rng.choice([0, 1, 10, 1000, 2_500_000])
        value = rand_scalar(rng)
        col = pa.array([value] * 1 if rows else [], type=None).take(pa.array([0] * rows)) if rows else pa.array([])
        try:
            pq.write_table(pa.table({rng.choice(["latency_ms", "rep", "model", "phase", "junk"]): col}),
                           run / rng.choice(["samples.parquet", "requests.parquet", "x.parquet"]))
        except (pa.ArrowException, OverflowError):
            (run / "samples.parquet").write_bytes(str(value).encode()[:100])
    elif roll == 1:  # the manifest changed after signing
        m = json.loads((run / "manifest.json").read_text())
        m[rng.choice(["run_id", "status", "started_at", "engine", "kind"])] = rand_value(rng)
        (run / "manifest.json").write_text(json.dumps(m, default=str, allow_nan=True))
    elif roll == 2:  # a damaged or foreign signature
        (run / "signature.json").write_text(rng.choice(["{}", "[]", "not json", json.dumps(
            {"format": "lbench-run-signature/1", "key": "ab" * 32, "files": {}, "signature": "00"})]))
    elif roll == 3:
        (run / "signature.json").unlink()
    elif roll == 4:  # an extra file nobody signed
        target = run / rng.choice(["extra.parquet", "analysis.json", "logs/extra.log", "report.html"])
        target.parent.mkdir(exist_ok=True)
        target.write_bytes(b"x" * 10)
    elif roll == 5:  # a truncated table
        data = (run / "samples.parquet").read_bytes()
        (run / "samples.parquet").write_bytes(data[: rng.randrange(len(data))])
    if rng.random() < 0.6:
        try:
            sign_run(run)  # a trusted runner signs what it was given: the bounds must hold anyway
        except BadInput:
            pass


def case_archive(rng: random.Random, tmp: Path, archive: Path, n: list[int]) -> str:
    from harness.history.archive import add_run
    from harness.history.query import connect

    n[0] += 1
    run = make_run(tmp / "runs", n[0])
    mutate_run(rng, run)
    try:
        added = add_run(archive, run)
    except BadInput:
        return "refused"
    if added.outcome == "added" and not added.signer:
        raise AssertionError(f"an unsigned run was added: {run.name}")
    con = connect(archive)  # one run never breaks queries over the archive
    try:
        con.execute("SELECT count(*), avg(latency_ms) FROM samples").fetchall()
    finally:
        con.close()
    return "accepted"


def query_text(rng: random.Random) -> str:
    roll = rng.randrange(5)
    if roll == 0:
        return rng.choice(STATEMENTS)
    if roll == 1:
        return f"SELECT * FROM {rng.choice(ARCHIVE_FUNCS)}('{rng.choice(ARCHIVE_PATHS + NASTY).replace(chr(39), '')}')"
    if roll == 2:
        return f"SELECT length(repeat('x', {rng.choice([1, 1000, 1_000_000])})) AS n"
    if roll == 3:
        return "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t"
    return rng.choice(["SELECT count(*) FROM runs", "SELECT * FROM samples LIMIT 3", "SELECT 1; SELECT 2",
                       "SELECT * FROM metrics", "SELECT " + rng.choice(NASTY)])


def case_query(rng: random.Random, archive: Path) -> str:
    import threading

    import duckdb

    from harness.history.confined import confine
    from harness.history.query import check_read_only, connect

    sql = query_text(rng)
    con = connect(archive, refresh_catalog=False)
    timer = threading.Timer(2.0, con.interrupt)
    try:
        check_read_only(sql, con)
        confine(con, archive)
        timer.start()
        rows = con.execute(sql).fetchall()
    except (BadInput, duckdb.Error):
        return "refused"
    finally:
        timer.cancel()
        con.close()
    if "root:" in repr(rows) or "PRIVATE KEY" in repr(rows):
        raise AssertionError(f"read outside the archive: {sql!r}")
    return "accepted"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=300, help="cases per class (default 300)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default=None, help="one class: idle-spec, swap-spec, claim, bytes, server-args, shell, "
                                                  "archive, query")
    a = ap.parse_args()
    if a.n < 1:
        print("-n must be >= 1", file=sys.stderr)
        return 2
    rng = random.Random(a.seed)
    idle_keys, swap_keys = list(IdleSpec.__dataclass_fields__), list(SwapSpec.__dataclass_fields__)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        os.environ["LBENCH_RUNNER_KEY"] = str(tmp / "runner-key.pem")  # a runner of its own, in the temp dir
        from harness.attest import key_id, runner_key
        from harness.history.archive import add_run
        from harness.history.trust import trust_key

        archive = tmp / "archive"
        trust_key(archive, key_id(runner_key()), "fuzz")
        add_run(archive, make_run(tmp / "runs", 0))
        numbered = [0]
        classes = {
            "idle-spec": lambda: case_file(tmp, load_spec, spec_text(rng, idle_keys, "idle")),
            "swap-spec": lambda: case_file(tmp, load_swap_spec, spec_text(rng, swap_keys, "swap")),
            "claim": lambda: case_file(tmp, load_claim, spec_text(rng, CLAIM_KEYS, None, CLAIM_BASE)),
            "bytes": lambda: case_file(tmp, rng.choice([load_spec, load_swap_spec, load_claim]),
                                       bytes(rng.randrange(256) for _ in range(rng.randrange(200)))),
            "server-args": lambda: case_args(rng),
            "shell": lambda: case_shell(rng, tmp),
            "archive": lambda: case_archive(rng, tmp, archive, numbered),
            "query": lambda: case_query(rng, archive),
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
                    first_crash = first_crash or traceback.format_exc(limit=8)
            ms = (time.perf_counter() - t0) * 1000 / a.n
            print(f"{name:<12} {a.n:>6} {counts['accepted']:>9} {counts['refused']:>8} {counts['crashed']:>8} {ms:>8.2f}")
            if first_crash:
                crashed_any = True
                print(f"  first crash in {name}:\n{first_crash}", file=sys.stderr)
    return 1 if crashed_any else 0


if __name__ == "__main__":
    sys.exit(main())
