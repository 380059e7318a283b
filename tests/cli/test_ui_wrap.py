"""harness.cli.ui.wrap: lines at most the width, phrases never cut, nothing lost or reordered."""

from hypothesis import given
from hypothesis import strategies as st

from harness.cli.ui import wrap, wrap_words

phrases = st.lists(st.text(alphabet="abc-=/.· 0123456789", min_size=1, max_size=30).map(str.strip)
                   .filter(bool), max_size=30)


@given(phrases, st.integers(min_value=20, max_value=120))
def test_wrap_keeps_phrases_whole_and_lines_within_the_width(atoms, width):
    lines = wrap(atoms, width, first="  ", rest="      ")
    for line in lines:
        assert len(line) <= width or line.strip() in atoms  # only a phrase longer than a line overflows
    joined = " ".join(line.strip() for line in lines)
    assert joined == " ".join(atoms)  # same phrases, same order
    for atom in atoms:  # each phrase is on one line
        assert any(atom in line for line in lines)


def test_wrap_words_never_breaks_a_path():
    path = "/tmp/" + "x" * 90 + "/report.html"
    lines = wrap_words(f"html written to {path} for run 20261201T054030Z-idle-3f9c", 80)
    assert path in [line.strip() for line in lines]
    assert all(len(line) <= 80 for line in lines if path not in line)
