"""``lbench --version``: lbench's version and the engine build a run would use (found, never built)."""

from __future__ import annotations

import typer

from harness import __version__
from harness.cli.ui import out


def engine_line() -> str:
    """Which llama-server a run would use, in the order runs use (engine info shows every candidate).
    Nothing is built or downloaded: without one this says "not built"."""
    from harness.engines import provision
    from harness.engines.binary import _probe_version, candidates
    from harness.errors import LbenchError

    plan = provision.plan_build()
    for source, path in candidates(None):
        if path is None:
            continue
        if not path.is_file():
            return f"llama-server {path} (from {source}): missing"
        try:
            version, build, _commit = _probe_version(path)
        except LbenchError as exc:
            return f"llama-server {path} (from {source}): cannot run it ({exc})"
        return f"llama-server build {build if build is not None else 'unknown'} ({version}) {path} (from {source})"
    return (f"llama-server: not built (pinned build {provision.BUILD_NUMBER}, cache key {plan.key}; "
            "lbench engine install builds it)")


def version_callback(value: bool) -> None:
    if not value:
        return
    out.print(f"lbench {__version__}", markup=False, highlight=False)
    out.print(engine_line(), markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(0)
