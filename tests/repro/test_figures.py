"""Each figure declared once (harness/repro/figures.py): the value lbench judges and the shell
command recipe.sh computes it with come from one object, and on the same router log they agree.
The log lines are verbatim from a run of build 11434 (the lines tests/engines/test_router_parsing.py
quotes); no engine here."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.engines.router import TimelineEvent, parse_router_line
from harness.repro.base import Evidence, measure
from harness.repro.figures import (DIFFERS, PEAK_CHILDREN, AnyOf, Answered, ChildEnv, FirstEvicted, GaveUp, Given,
                                   LogBefore, ReplyHas,
                                   LogBetween, LogCount, LogCountBefore, LogHas, LruRounds, Measured, OkCount, ReplyStatus,
                                   SseBefore, SseSent, TickEvictions, TimeToLine, Unmeasured)
from harness.repro.lab import Lab, Reply
from timeline_lab import timeline_lab

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
    # build 11434, router-cancel-waiting-get, 2026-12-03 (tests/engines/test_router_parsing.py)
    '0.00.546.023 W srv    operator(): got exception: {"error":{"code":500,"message":"request cancelled while waiting '
    'for model name=tiny-q4","type":"server_error"}}',
]


def _lab(tmp_path: Path, replies: list[Reply]) -> Lab:
    """The log's lines arrive at t = their index."""
    events = []
    for i, line in enumerate(LOG):
        parsed = parse_router_line(line)
        assert parsed is not None, line
        kind, detail = parsed
        events.append(TimelineEvent(float(i), "router", kind, detail.get("model"), detail, line))
    lab = timeline_lab(events, replies=replies)
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
    return ("true" if value else "false") if isinstance(value, bool) else "" if value is None else str(value)


@pytest.mark.parametrize("kind", ["queued", "spawn", "evict", "stop_sent", "kill_loading", "kill_timeout", "exited",
                                  "proxy", "cancelled", ("evict", "stop_sent")])
@pytest.mark.parametrize("model", [None, "a", "b", "x", "m", "tiny-q8", "tiny-f16", "tiny-q4", "nobody"])
def test_log_figures_count_the_same_lines_in_python_and_in_shell(tmp_path, kind, model):
    lab = _lab(tmp_path, [])
    for figure in (LogCount(kind, model), LogHas(kind, model), LogCount(kind, model, minus=1)):
        assert _shell(figure.shell(lab), tmp_path) == _word(figure.value(lab)), (figure, kind, model)


@pytest.mark.parametrize(("start", "end"), [(0, None), (0, 3), (2, 6), (3, 9), (6, None), (9, None), (0, 0), (3, 3),
                                           (10, 10)])
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
    assert _shell(figure.shell(lab), tmp_path) == _word(figure.value(lab)), (first, then)


MARKS = [None, 0, 2, 3, 4, 7, 8, 10]  # a log mark after line k: L_=k, lbench's time k - 0.5


def _marked(tmp_path: Path, **marks: int | None) -> tuple[Lab, str]:
    """A lab over LOG with log marks after the given lines, and the script's L_ lines for them."""
    lab = _lab(tmp_path, [])
    lab.log_marks = {name: k - 0.5 for name, k in marks.items() if k is not None}
    return lab, "".join(f"L_{name}={k}; " for name, k in marks.items() if k is not None)


@pytest.mark.parametrize("after", MARKS)
@pytest.mark.parametrize(("first", "then"), [(("evict", None), ("proxy", "a")), (("proxy", "a"), ("evict", None)),
                                             (("spawn", "b"), ("exited", "m")), (("exited", "m"), ("spawn", "b")),
                                             (("evict", "x"), ("spawn", "nobody")), (("spawn", "nobody"), ("proxy", "a"))])
@pytest.mark.parametrize("then_needed", [True, False])
def test_line_order_after_a_log_mark_is_the_same_in_python_and_in_shell(tmp_path, after, first, then, then_needed):
    lab, marks = _marked(tmp_path, s=after)
    figure = LogBefore(first, then, after="s" if after is not None else None, then_needed=then_needed)
    assert _shell(marks + figure.shell(lab), tmp_path) == _word(figure.value(lab)), (first, then, after)


@pytest.mark.parametrize("after", MARKS)
@pytest.mark.parametrize(("kind", "model", "before"), [("spawn", "b", ("proxy", "a")), ("proxy", "a", ("proxy", "a")),
                                                       (("evict", "stop_sent"), None, ("exited", "m")),
                                                       ("queued", "a", ("spawn", "nobody"))])
def test_lines_before_another_are_the_same_in_python_and_in_shell(tmp_path, after, kind, model, before):
    lab, marks = _marked(tmp_path, s=after)
    figure = LogCountBefore(kind, model, before, "s" if after is not None else None)
    assert _shell(marks + figure.shell(lab), tmp_path) == _word(figure.value(lab)), (kind, model, before, after)


@pytest.mark.parametrize("after", MARKS)
@pytest.mark.parametrize("is_", [None, "tiny-q8", "x"])
def test_first_evicted_model_is_the_same_in_python_and_in_shell(tmp_path, after, is_):
    """Two of the three eviction forms the builds write: 'evicting idle LRU name=...' and 'removing LRU name=...'."""
    lab, marks = _marked(tmp_path, s=after)
    figure = FirstEvicted("s" if after is not None else None, is_)
    assert _shell(marks + figure.shell(lab), tmp_path) == _word(figure.value(lab)), (after, is_)
    if after is None and is_ is None:
        assert figure.value(lab) == "tiny-q8"


@pytest.mark.parametrize(("after", "until"), [(0, 10), (0, 3), (2, 3), (3, 10), (0, 2), (8, 10), (0, 0), (2, 2),
                                              (3, 3)])
@pytest.mark.parametrize("names", [False, True])
def test_tick_evictions_are_the_same_in_python_and_in_shell(tmp_path, after, until, names):
    lab, marks = _marked(tmp_path, y=after, thaw=until)
    figure = TickEvictions("y", "thaw", names)
    assert _shell(marks + figure.shell(lab), tmp_path) == _word(figure.value(lab)), (after, until, names)


@pytest.mark.parametrize("stat", ["victims", "rounds", "non_lru", "distinguishing"])
@pytest.mark.parametrize("plan", [(("r1", 0, "tiny-q8", True), ("r2", 3, "x", False), ("r3", 4, "y", True)),
                                  (("r1", 0, "x", True), ("r2", 3, "x", True)), (("r1", 8, "a", True),)])
def test_lru_rounds_are_the_same_in_python_and_in_shell(tmp_path, stat, plan):
    lab, marks = _marked(tmp_path, **{mark: k for mark, k, _, _ in plan})
    figure = LruRounds(tuple((mark, lru, telling) for mark, _, lru, telling in plan), stat)
    assert _shell(marks + figure.shell(lab), tmp_path) == _word(figure.value(lab)), (stat, plan)


@pytest.mark.parametrize("after", [0, 2, 4, 5, 6, 10])
def test_any_of_is_the_same_in_python_and_in_shell(tmp_path, after):
    lab, marks = _marked(tmp_path, c=after)
    figure = AnyOf((LogBetween("kill_loading", "m", "c"), FirstEvicted("c", "x")))
    assert _shell(marks + figure.shell(lab), tmp_path) == _word(figure.value(lab)), after
    assert figure.value(lab) is (after <= 5)


@pytest.mark.parametrize(("sse", "after", "expected"), [
    ([(1.0, "a", "unloaded"), (2.0, "b", "loading")], 0.5, True),
    ([(1.0, "b", "loading"), (2.0, "a", "unloaded")], 0.5, False),
    ([(1.0, "a", "unloaded"), (2.0, "b", "loading"), (3.0, "a", "unloaded")], 1.5, False),  # A's unload before the mark
    ([(2.0, "b", "loading")], 0.5, False),
    ([(1.0002, "b", "loading"), (1.0004, "a", "unloaded")], 0.5, False),  # one millisecond: the stream's order decides
    ([(1.0002, "a", "unloaded"), (1.0004, "b", "loading")], 0.5, True)])
def test_status_order_on_models_sse_is_the_same_in_python_and_in_shell(tmp_path, sse, after, expected):
    """The script keeps /models/sse as time<TAB>model<TAB>status with its clock; lbench as timeline events."""
    lab = _lab(tmp_path, [])
    lab.session.events = [TimelineEvent(t, "sse", f"status:{status}", model, {}, "") for t, model, status in sse]
    lab.marks = {"b": after}
    (tmp_path / "sse.txt").write_text("".join(f"{t:.3f}\t{m}\t{s}\n" for t, m, s in sse))
    figure = SseBefore(("a", "unloaded"), ("b", "loading"), "b")
    assert figure.value(lab) is expected
    assert _shell(f"T_b={after}; " + figure.shell(lab), tmp_path) == _word(expected)
    for sent in (SseSent("a", "unloaded", "b"), SseSent("b", "loading", "b"), SseSent("b", "loaded", "b")):
        assert _shell(f"T_b={after}; " + sent.shell(lab), tmp_path) == _word(sent.value(lab)), sent


def test_reply_figures_read_the_same_replies_in_python_and_in_shell(tmp_path):
    replies = [Reply("a", 0, 1, 200, "ok", sh_n=1), Reply("b", 0, 1, 503, "model limit reached", sh_n=2),
               Reply("b", 0, 1, None, "", error="timed out", sh_n=3)]
    lab = _lab(tmp_path, replies)
    figures = [OkCount(), OkCount(("b",)), OkCount(("a", "b")), Answered("a"), Answered("b"), ReplyStatus(None, 200)]
    figures += [ReplyStatus(r, is_) for r in replies for is_ in (None, 200, 503)]
    figures += [GaveUp(r) for r in replies] + [ReplyHas(r, text) for r in replies for text in ("ok", "limit", "x")]
    for figure in figures:
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


@pytest.mark.parametrize(("kind", "model", "seen"), [("spawn", "b", 0), ("exited", "m", 0), ("proxy", "a", 1),
                                                     ("proxy", "a", 2), (("evict", "stop_sent"), "tiny-f16", 0),
                                                     ("spawn", "nobody", 0)])
def test_time_to_a_watched_line_is_the_same_in_python_and_in_shell(tmp_path, kind, model, seen):
    """``Lab.watch`` saw ``seen`` such lines: the script notes in $WORK/T_<name> when its log gets the next
    one (here: when lbench received it, the line's index); from a time mark in seconds, from a background
    reply's end in milliseconds."""
    lab = _lab(tmp_path, [])
    lab.marks, lab.watches = {"m": 0.25}, {"w": (kind, model, seen)}
    reply = Reply("a", 0.0, 0.75, 200, "", sh_n=1)
    hits = [e for e in lab.events if LogHas(kind, model).value(timeline_lab([e]))]
    if len(hits) > seen:
        (tmp_path / "T_w").write_text(f"{hits[seen].t}\n")
    (tmp_path / "reply-1.done").write_text("0.75\n")
    for figure in (TimeToLine("m", "w"), TimeToLine(reply, "w")):
        out, value = _shell("T_m=0.25; " + figure.shell(lab), tmp_path), figure.value(lab)
        assert (float(out) == value) if value is not None else out == "", (figure, out, value)
        assert (value is None) is (len(hits) <= seen)
    if (kind, seen) == ("proxy", 1):
        assert TimeToLine("m", "w").value(lab) == 9 - 0.25  # the second proxy line (index 9), not the first


@pytest.mark.parametrize("variables", [(("LLAMA_ARG_MODELS_MAX", None),), (("LLAMA_ARG_MODELS_MAX", "1"),),
                                       (("LLAMA_ARG_MODELS_MAX", "2"),), (("LBENCH_X", "a b"), ("LLAMA_ARG_MODELS_MAX", None)),
                                       (("LLAMA_SERVER_ROUTER_PORT", None),), (("LLAMA_ARG", None),), ()])
def test_child_environment_is_read_the_same_in_python_and_in_shell(tmp_path, variables):
    env = {"LLAMA_ARG_MODELS_MAX": "1", "LBENCH_X": "a b", "PATH": "/usr/bin"}
    (tmp_path / "child-env.txt").write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    figure = ChildEnv(env, variables)
    assert _shell(figure.shell(_lab(tmp_path, [])), tmp_path) == _word(figure.value(_lab(tmp_path, [])))
