"""``lbench history query``: a statement from the command line, run where it can reach nothing else.

The statement is untrusted (it may come from a script, a CI variable, a colleague's notes), so it
runs in a child process that holds a DuckDB connection locked to the archive's views:

- DuckDB's own bounds, set once the views exist and then locked (``lock_configuration``): no
  file, directory or URL outside the archive (``enable_external_access = false`` with the archive as
  the only ``allowed_directories``: ``read_text('/etc/passwd')``, ``glob('/home/**')``, a URL are
  refused), no extension installed or loaded, no temporary files (``temp_directory = ''``: nothing
  spills into the caller's directory; a sort past the memory bound fails instead), ``memory_limit``;
- the child's address space is bounded (``RLIMIT_AS``): what DuckDB does not count against its
  memory limit (``repeat('x', 2e9)`` builds one 2 GB string) ends the child, not the machine;
- a time bound (``--timeout``, default ``TIMEOUT_S``): past it the child is killed; Ctrl-C and
  SIGTERM kill it too (the parent waits in Python, where signals are handled), and the command
  ends with one line and its exit code (2 for a query past a bound, 130 when interrupted);
- the answer comes back as an Arrow stream over a pipe, bounded in size (``MAX_RESULT_BYTES``).

The child is started with ``spawn`` (a fresh interpreter: no DuckDB thread of the parent is forked).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from harness.errors import BadInput
from harness.history.query import check_read_only, connect
from harness.history.catalog import catalog_dir, refresh

TIMEOUT_S = 60.0
STARTUP_S = 120.0  # the child's start (imports, the views): not counted in the query's bound
MEMORY_LIMIT = "1GB"  # DuckDB's buffer manager
ADDRESS_SPACE_BYTES = 4 * 1024**3  # the child's whole address space: interpreter, libraries, DuckDB, the result
MAX_RESULT_BYTES = 256 * 1024**2
HINT = "views: runs, metrics, samples, requests, events, memory, median_k; their columns: docs/history.md"


def confine(con: Any, archive: Path) -> None:
    """Lock a connection whose views exist to the archive: no other file, no URL, no extension,
    no temporary file, bounded memory; the settings cannot be changed back."""
    root = str(Path(archive).resolve())
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET allowed_directories = ?", [[root + os.sep]])
    con.execute("SET temp_directory = ''")
    con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def _child(archive: str, sql: str, address_space: int, conn: Any, install: Callable[[], None] | None
           ) -> None:  # runs in the child process
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C reaches the whole group: the parent stops us
    if install is not None:
        install()  # a spawned interpreter knows no kind of run until it is given them (before the memory bound)
    if sys.platform != "win32":  # Windows has no RLIMIT_AS: DuckDB's memory_limit alone bounds it there
        import resource

        try:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
        except (ValueError, OSError):
            pass
    try:
        import pyarrow as pa

        con = connect(Path(archive).resolve(), refresh_catalog=False)
        try:
            check_read_only(sql, con)
            confine(con, Path(archive))
            conn.send(("ready",))  # the time bound counts from here: the query alone
            relation = con.sql(sql)
            table = relation.to_arrow_table() if hasattr(relation, "to_arrow_table") else relation.arrow()
        finally:
            con.close()
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        data = sink.getvalue().to_pybytes()
        if len(data) > MAX_RESULT_BYTES:
            conn.send(("bad", f"the answer is {len(data):,} bytes, over the bound of {MAX_RESULT_BYTES:,}",
                       "add a LIMIT, or aggregate (GROUP BY) in the query"))
        else:
            conn.send(("ok", data))
    except BadInput as exc:
        conn.send(("bad", exc.what, exc.hint))
    except MemoryError:
        conn.send(("bad", "the query ran out of memory (the query's bound)", "aggregate or filter more, add a LIMIT"))
    except Exception as exc:  # noqa: BLE001 - DuckDB's errors (permission, memory, parse), all said in one line
        name = type(exc).__name__
        first = str(exc).splitlines()[0] if str(exc) else name
        if "duckdb" in type(exc).__module__ or "Exception" in name:
            conn.send(("bad", f"the query failed: {first}", HINT if "Permission" not in name else
                       "a history query reads the archive's views only: no other file, URL or extension"))
        else:
            conn.send(("bad", f"the query failed: {name}: {first}", HINT))
    finally:
        conn.close()


def run_confined(archive: Path, sql: str, *, timeout_s: float = TIMEOUT_S, address_space: int = ADDRESS_SPACE_BYTES,
                 install: Callable[[], None] | None = None) -> pd.DataFrame:
    """The statement's rows, run in a confined child process (see the module's docstring).  ``install``
    (``harness.kinds.install``, a module's function: the child imports it by name) registers the kinds of
    run in the child when the catalog could not be saved (a read-only archive): the child then files the
    runs again, each by its kind."""
    import pyarrow as pa

    archive = Path(archive)
    if not archive.is_dir():
        raise BadInput("no history archive there", where=str(archive),
                       hint="add runs first: lbench history add RESULTS_DIR (or give --archive)")
    if not timeout_s > 0:
        raise BadInput(f"the time bound is {timeout_s} s", where="--timeout", hint="give a positive number of seconds")
    refresh(archive)  # the catalog is the archive's own file: brought up to date here, read-only in the child
    saved = all(p.is_file() and not p.is_symlink() for p in (catalog_dir(archive) / f"{name}.parquet"
                                                              for name in ("runs", "metrics")))
    ctx = multiprocessing.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(str(archive), sql, address_space, send, None if saved else install), daemon=True)
    proc.start()
    send.close()
    try:
        if recv.poll(STARTUP_S):
            message = recv.recv()
            if message[0] == "ready" and not recv.poll(timeout_s):
                raise BadInput(f"the query ran past its time bound of {timeout_s:g} s and was stopped",
                               where=sql[:80], hint="give a longer bound with --timeout SECONDS, or a query that "
                                                    "reads less")
            if message[0] == "ready":
                message = recv.recv()
        else:
            raise BadInput(f"the query's process did not start within {STARTUP_S:g} s", where=sql[:80],
                           hint="the machine is overloaded; try again")
    except EOFError:
        proc.join(5)
        raise BadInput(f"the query ended without an answer (its process exited with {proc.exitcode}): most "
                       f"likely past the memory bound of {address_space / 1024**3:g} GiB", where=sql[:80],
                       hint="aggregate or filter more, or add a LIMIT") from None
    except KeyboardInterrupt:
        print("lbench: history query interrupted; the query was stopped", file=sys.stderr)
        raise
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        recv.close()
    if message[0] == "ok":
        with pa.ipc.open_stream(message[1]) as reader:
            return reader.read_all().to_pandas()
    raise BadInput(message[1], where=sql[:80], hint=message[2])
