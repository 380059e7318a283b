"""The trend view is found wherever views are looked up, without importing the site's code first."""

from __future__ import annotations

import json
import subprocess
import sys


def test_a_fresh_interpreter_finds_the_trend_view_without_the_heavy_modules():
    code = ("import json, sys\n"
            "from harness.kinds import VIEWS\n"
            "view = VIEWS.get('trend')\n"
            "print(json.dumps({'views': sorted(VIEWS), 'template': getattr(view, 'template', None),\n"
            "  'loaded': [m for m in ('harness.history.trend', 'duckdb', 'matplotlib', 'pandas')\n"
            "             if m in sys.modules]}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    assert "trend" in got["views"] and got["template"] == "trend_index.html.j2"
    assert got["loaded"] == []  # registering the view loads none of what building the site needs


def test_the_site_module_and_the_registry_hold_one_view_class():
    from harness.history.trend import TrendView
    from harness.kinds import VIEWS

    assert isinstance(VIEWS["trend"], TrendView)
