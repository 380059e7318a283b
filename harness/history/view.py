"""The trend across builds as a view across runs (``harness.kinds.VIEWS["trend"]``).

Registered by ``harness/kinds.py`` itself, so every place that looks views up finds it; this
module imports nothing heavy (the site's code, DuckDB and matplotlib load when a context is asked for).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class TrendView:
    """``lbench trend``'s index page (``harness/history/trend.py``) as a ``harness.kinds.RunView``."""

    name = "trend"
    title = "history across builds and machines"
    template = "trend_index.html.j2"

    def context(self, root: Path, **filters: Any) -> dict:
        from harness.history.trend import build_site

        # the index shows no plot: none is drawn
        return build_site(Path(root), machine=filters.get("machine"), model=filters.get("model"), plots=False).index
