"""The HTML side of reports: the Jinja environment, inline PNGs, and writing a page atomically.

Templates are found through ``harness.resources``; autoescaping is on, so every
user-controlled string (model names, paths, command lines, error bodies) is escaped.
Every report module imports from here; none imports another report module's helpers.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import jinja2

from harness import resources
from harness.atomic import atomic_write_text
from harness.units import size_text
from harness.probes.host import virtual_status

if TYPE_CHECKING:
    from harness.store import Run


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(resources.templates_dir())),
                             autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
                             undefined=jinja2.StrictUndefined)
    env.filters["ms"] = lambda v: "–" if v is None or v != v else f"{v:,.2f}"
    env.filters["gb"] = size_text
    env.filters["num"] = lambda v, fmt="%.2f": "–" if v is None or v != v else fmt % v  # null/NaN: not measured
    return env


def scrolling_tables(html: str) -> str:
    """Each table inside a box that scrolls sideways on its own (``div.scroll``): a wide table
    never widens the page on a phone.  Autoescaping means no user string holds a raw ``<table``."""
    return html.replace("<table", '<div class="scroll"><table').replace("</table>", "</table></div>")


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


def write_page(template: str, context: dict, out: Path, post: Callable[[str], str] | None = None) -> Path:
    """Render ``template`` with ``context`` into ``out`` (temp file + rename: never half a page);
    ``post`` rewrites the rendered page first (redaction).  ``virtual_hosts`` (the host facts of every run
    behind the page) become the virtual-machine banner every report carries (``virtual``)."""
    if "virtual_hosts" in context:
        context = {**context, "virtual": virtual_status(context["virtual_hosts"])}
    html = scrolling_tables(environment().get_template(template).render(**context))
    return atomic_write_text(out, post(html) if post is not None else html)


def run_context(run: Run) -> dict:
    """What every run report shows of the run itself: manifest, id, completeness, models (synthetic
    ones apart for the banner), cells, host and engine."""
    models = run.record.models
    return {"run": run.record, "run_id": run.run_id, "incomplete": not run.complete, "models": models,
            "synthetic": [m for m in models if m.get("synthetic")], "cells": run.record.cells,
            "host": run.record.host.facts, "engine": run.record.engine.facts}

