"""Timed sequences: the step syntax, letters, staggers, files, and the errors of bad input."""

import pytest

from harness.errors import BadInput
from harness.workloads.sequence import Step, parse, read_source, resolve, stagger

NAMES = ["tiny-q8", "tiny-q4", "tiny-f16"]


def test_a_then_b_100_ms_later():
    assert resolve(parse("A@0,B@0.1", "t"), NAMES, "t") == [Step("tiny-q8", 0.0), Step("tiny-q4", 0.1)]


def test_names_lines_and_comments():
    text = "# the user's report: B 2.1 s after A\ntiny-q8 @ 0\ntiny-q4@2.1  # cold\n\nA@2.15"
    assert resolve(parse(text, "t"), NAMES, "t") == [Step("tiny-q8", 0.0), Step("tiny-q4", 2.1),
                                                    Step("tiny-q8", 2.15)]


def test_stagger_is_every_model_in_order():
    assert resolve(stagger(3, 0.05, "t"), NAMES, "t") == [Step("tiny-q8", 0.0), Step("tiny-q4", 0.05),
                                                          Step("tiny-f16", 0.1)]


def test_a_file(tmp_path):
    f = tmp_path / "steps.txt"
    f.write_text("A@0\nB@0.05\n")
    assert parse(read_source(f"@{f}", "t"), "t") == [Step("A", 0.0), Step("B", 0.05)]


@pytest.mark.parametrize("text,what", [
    ("", "no step"), ("A", "bad sequence step"), ("A@x", "seconds"), ("A@-1", "seconds"), ("A@nan", "seconds"),
    ("A@1,B@0.5", "earlier than"), ("A@1e9", "seconds"),
])
def test_bad_steps(text, what):
    with pytest.raises(BadInput, match=what):
        parse(text, "--sequence")


def test_unknown_model_names_the_choices():
    with pytest.raises(BadInput, match="no such model") as info:
        resolve(parse("D@0", "t"), NAMES, "--sequence")
    assert "tiny-q8" in (info.value.hint or "")


def test_missing_file():
    with pytest.raises(BadInput, match="cannot read sequence file"):
        read_source("@/nonexistent/steps.txt", "--sequence")


def test_bad_stagger():
    with pytest.raises(BadInput, match="stagger"):
        stagger(3, -1.0, "--stagger")
