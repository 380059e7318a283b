"""Text from data (a run's labels, a CPU model, a trust list's labels, a manifest's strings) made
safe to print on a terminal: the one helper every listing and message uses (issue 47).

A label is chosen by whoever made the run or the archive, so it may hold ANSI escape sequences
(colours, cursor moves, a cleared line, an OSC 8 link, a changed window title), carriage returns
and newlines that would draw a fake line ("... trusted"), or bidirectional overrides that reorder
what is shown.  ``printable`` writes every such character as a visible escape (``\\x1b``,
``\\n``, ``\\u202e``), and cuts a huge value (a 60 MB manifest string) to ``limit`` characters
with a marker saying how much was left out.
"""

from __future__ import annotations

import re

# C0 and C1 controls but tab, DEL, line/paragraph separators, bidi embeddings/overrides/isolates,
# zero-width and BOM characters that can hide or reorder text
_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
LIMIT = 2000  # characters of one value shown at most


def printable(value: object, limit: int | None = LIMIT) -> str:
    """``value`` as text with every control, bidi and invisible character escaped (``\\x1b``),
    at most ``limit`` characters of it (None: all) followed by ``… (N more characters)``."""
    text = str(value)
    cut = ""
    if limit is not None and len(text) > limit:
        cut = f"… ({len(text) - limit:,} more characters)"
        text = text[:limit]
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text) + cut
