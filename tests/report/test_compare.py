"""compare.html: the rows a group's panel draws are the group's own (regime, one pause, or a new-step range)."""

import pandas as pd

from harness.report.compare import group_mask


def test_group_mask_reads_each_kind_of_group_label():
    f = pd.DataFrame({"pause_requested_s": [0, 0.05, 0.2, 1.0], "regime": ["warm", "warm", "woken", "woken"]})
    assert list(group_mask(f, "woken")) == [False, False, True, True]
    assert list(group_mask(f, "pause=0.05s")) == [False, True, False, False]
    assert list(group_mask(f, "new step pauses>=0.05s")) == [False, True, True, True]
    assert list(group_mask(f, "new step pauses>=0.05s,<1s")) == [False, True, True, False]


def test_swap_frames_without_pauses_use_the_class():
    f = pd.DataFrame({"regime": ["warm", "cold"]})
    assert list(group_mask(f, "cold")) == [False, True]
