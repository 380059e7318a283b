"""The fit warning rides on the headline sentence of its cell (harness/analysis/idle.py with_fit)."""

from types import MappingProxyType, SimpleNamespace

from harness.analysis.idle import with_fit


def cell(model: str, setting: str, fit: dict | None) -> SimpleNamespace:
    return SimpleNamespace(model=model, setting=setting, facts=MappingProxyType({"fit": fit} if fit else {}))


def test_only_the_cell_that_did_not_fit_carries_the_warning():
    wake = [{"model": "big", "setting": "default"}, {"model": "small", "setting": "default"}]
    headline = ["big · default: no clear wake step.", "small · default: no clear wake step."]
    cells = [cell("big", "default", {"offloaded_layers": "20/33", "gpu_share": 0.6061, "warning": "big does not fit"}),
             cell("small", "default", {"offloaded_layers": "17/17", "gpu_share": 1.0, "warning": None})]
    assert with_fit(headline, wake, cells) == ["big · default: no clear wake step. Warning: big does not fit.",
                                               "small · default: no clear wake step."]
