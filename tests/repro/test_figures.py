"""Each figure declared once (harness/repro/figures.py): the value lbench judges and the shell
command recipe.sh computes it with come from one object, and on the same router log they agree.
The log lines are verbatim from a run of build 11434 (the lines tests/engines/test_router_parsing.py
quotes); no engine here."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.engines.router import TimelineEvent, parse_router_line
from harness.repro.base import Evidence, measure
from harness.repro.figures import (DIFFERS, PEAK_CHILDREN, Answered, Given, LogBefore, LogBetween, LogCount, LogHas,
                                   Measured, OkCount, SseBefore, Unmeasured)
from harness.repro.lab import Lab, Reply

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash")
ROOT = Path(__file__).resolve().parents[2]

# verbatim router log lines (run of build 11434; tests/engines/test_router_parsing.py)
LOG = [
    "0.02.506.877 I srv          join: request for name=a queued at position 1",
    "0.02.524.646 I srv          load: spawning server instance with name=b on port 40643",
    "0.00.139.671 I srv         tick: evicting idle LRU name=tiny-q8 for a queued request",
    "I srv  load: models_max limit reached, removing LRU name=x",
    "I srv  unload: stopping model instance name=tiny-f16",
    "W srv  unload: model name=m is still loading, force-killing",
    "W srv  operator(): force-killing model instance name=m after timeout",
    "I srv  operator(): instance name=m exited with status -9",
    "0.02.517.176 I srv  proxy_reques: proxying request to model a on port 57261",
    "0.02.517.176 I srv  proxy_reques: proxying request to model a on port 57261",
]


def _lab(tmp_path: Path, replies: list[Reply]) -> Lab:
    events = []
    for i, line in enumerate(LOG):
        parsed = parse_router_line(line)
        assert parsed is not None, line
        kind, detail = parsed
        events.append(TimelineEvent(float(i), "router", kind, detail.get("model"), detail, line))
    lab = object.__new__(Lab)
    lab.replies, lab.shell_figures, lab.given, lab.unmeasured = replies, {}, {}, {}
    lab.t0, lab.marks, lab.log_marks, lab.t_stop = 0.0, {}, {}, None
    lab.session = SimpleNamespace(events=events)
    (tmp_path / "router.stderr.log").write_text("\n".join(LOG) + "\n")
    for r in replies:
        (tmp_path / f"reply-{r.sh_n}.status").write_text(f"{r.status if r.status is not None else '000'}\n")
        (tmp_path / f"reply-{r.sh_n}.body").write_text(r.body)
    return lab


def _shell(command: str, tmp_path: Path) -> str:
    functions = ('log_count() { grep -cE -- "$1" "$WORK/router.stderr.log" 2>/dev/null || true; }\n')
    done = subprocess.run([BASH, "-c", f"WORK={tmp_path}\n{functions}{command}"], capture_output=True, text=True)
    return done.stdout.strip()


def _word(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


@pytest.mark.parametrize("kind", ["queued", "spawn", "evict", "stop_sent", "kill_loading", "kill_timeout", "exited",
                                  "proxy", ("evict", "stop_sent")])
@pytest.mark.parametrize("model", [None, "a", "b", "x", "m", "tiny-q8", "tiny-f16", "nobody"])
def test_log_figures_count_the_same_lines_in_python_and_in_shell(tmp_path, kind, model):
    lab = _lab(tmp_path, [])
    for figure in (LogCount(kind, model), LogHas(kind, model)):
        assert _shell(figure.shell(lab), tmp_path) == _word(figure.value(lab)), (figure, kind, model)


@pytest.mark.parametrize(("start", "end"), [(0, None), (0, 3), (2, 6), (3, 9), (6, None), (9, None)])
@pytest.mark.parametrize(("kind", "model"), [("spawn", "b"), (("evict", "stop_sent"), "tiny-f16"), ("kill_loading", "m"),
                                             ("proxy", "a"), ("exited", "m"), ("queued", "b")])
def test_lines_between_log_marks_are_the_same_lines_in_python_and_in_shell(tmp_path, start, end, kind, model):
    """A log mark after line k: the script's L_ holds k (lines so far), lbench's time lies between
    the receipt of line k and line k + 1 (the lines arrive at t = their index here)."""
    lab = _lab(tmp_path, [])
    lab.log_marks = {"s": start - 0.5, **({"e": end - 0.5} if end is not None else {})}
    figure = LogBetween(kind, model, "s", "e" if end is not None else None)
    marks = f"L_s={start}; " + (f"L_e={end}; " if end is not None else "")
    assert _shell(marks + figure.shell(lab), tmp_path) == _word(figure.value(lab)), (kind, model, start, end)


@pytest.mark.parametrize(("first", "then"), [((("evict", "stop_sent"), "tiny-f16"), ("proxy", "a")),
                                             (("proxy", "a"), ("spawn", "b")), (("queued", "a"), ("spawn", "b")),
                                             (("exited", "m"), ("kill_timeout", "m")), (("spawn", "nobody"), ("proxy", "a"))])
def test_line_order_is_the_same_in_python_and_in_shell(tmp_path, first, then):
    lab = _lab(tmp_path, [])
    figure = LogBefore(first, then)
    functions = 'log_first() { grep -nE -- "$1" "$WORK/router.stderr.log" 2>/dev/null | head -n 1 | cut -d: -f1; }\n'
    assert _shell(functions + figure.shell(lab), tmp_path) == _word(figure.value(lab)), (first, then)


@pytest.mark.parametrize(("sse", "after", "expected"), [
    ([(1.0, "a", "unloaded"), (2.0, "b", "loading")], 0.5, True),
    ([(1.0, "b", "loading"), (2.0, "a", "unloaded")], 0.5, False),
    ([(1.0, "a", "unloaded"), (2.0, "b", "loading"), (3.0, "a", "unloaded")], 1.5, False),  # A's unload before the mark
    ([(2.0, "b", "loading")], 0.5, False)])
def test_status_order_on_models_sse_is_the_same_in_python_and_in_shell(tmp_path, sse, after, expected):
    """The script keeps /models/sse as time<TAB>model<TAB>status with its clock; lbench as timeline events."""
    lab = _lab(tmp_path, [])
    lab.session.events = [TimelineEvent(t, "sse", f"status:{status}", model, {}, "") for t, model, status in sse]
    lab.marks = {"b": after}
    (tmp_path / "sse.txt").write_text("".join(f"{t:.3f}\t{m}\t{s}\n" for t, m, s in sse))
    figure = SseBefore(("a", "unloaded"), ("b", "loading"), "b")
    assert figure.value(lab) is expected
    assert _shell(f"T_b={after}; " + figure.shell(lab), tmp_path) == _word(expected)


def test_reply_figures_read_the_same_replies_in_python_and_in_shell(tmp_path):
    replies = [Reply("a", 0, 1, 200, "ok", sh_n=1), Reply("b", 0, 1, 503, "model limit reached", sh_n=2),
               Reply("b", 0, 1, None, "", error="timed out", sh_n=3)]
    lab = _lab(tmp_path, replies)
    for figure in (OkCount(), OkCount(("b",)), OkCount(("a", "b")), Answered("a"), Answered("b")):
        assert _shell(figure.shell(lab), tmp_path) == _word(figure.value(lab)), figure


def test_measure_records_both_sides_from_one_declaration(tmp_path):
    lab = _lab(tmp_path, [Reply("a", 0, 1, 200, "", sh_n=1)])
    ev = Evidence()
    measure(ev, lab, spawns=LogCount("spawn", "b", "spawn lines for b"), cap=Given(2),
            exact=Unmeasured(7, "the kernel's events"), peak=Measured(3, "echo 3", "peak", differs="ps, not /proc"))
    assert ev.figures == {"spawns": 1, "cap": 2, "exact": 7, "peak": 3}
    assert set(lab.shell_figures) == {"spawns", "peak"} and lab.given == {"cap": 2}
    assert lab.unmeasured == {"exact": "the kernel's events"}
    assert lab.shell_figures["peak"] == ("echo 3", "peak (differs from lbench: ps, not /proc)")


def test_every_figure_measured_differently_is_named_in_the_claims_doc():
    text = (ROOT / "docs" / "claims.md").read_text()
    assert PEAK_CHILDREN.differs == DIFFERS["peak_children"]
    for figure in DIFFERS:
        assert f"`{figure}`" in text, figure
