"""The one writer of a gate's artefacts (``lbench gate`` and ``lbench ab``): JSON, JUnit and
Markdown staged together and renamed into place at once (never one new file beside two old ones),
then the Markdown appended to ``$GITHUB_STEP_SUMMARY`` when set."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from harness.atomic import atomic_write_many
from harness.errors import BadInput


def write_gate_outputs(outputs: Mapping[Path | None, str], markdown: str) -> None:
    """Write each ``path: text`` (None paths skipped) atomically, together; then the step summary."""
    try:
        atomic_write_many({Path(p): text.encode() for p, text in outputs.items() if p})
    except OSError as exc:
        raise BadInput(f"cannot write the gate's output: {exc.strerror or exc}", where=str(exc.filename or ""),
                       hint="give --markdown/--junit/--json paths in a folder that exists and is writable") from None
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a") as fh:
            fh.write(markdown)
