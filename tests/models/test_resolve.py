import pytest

from harness.errors import BadInput
from harness.models import presets
from harness.models.resolve import resolve
from harness.models.synth import synthesize


def test_synthetic_alias_generates_once(lbench_env):
    seen = []
    first = resolve("tiny-q8", announce=seen.append)
    assert first.source == "synthetic" and first.synthetic and first.path.is_file()
    assert any("generating synthetic model tiny-q8" in s for s in seen)
    seen.clear()
    again = resolve("tiny-q8", announce=seen.append)
    assert again.path == first.path and not seen


def test_catalog_alias_wins(lbench_env, tmp_path):
    real = synthesize(presets.get_shape("tiny"), presets.get_quant("q4"), tmp_path / "mine.gguf").path
    (tmp_path / "catalog.toml").write_text(f'[models]\ntiny-q8 = "{real}"\nother = {{ path = "{real}" }}\n')
    m = resolve("tiny-q8")
    assert m.source == "catalog" and m.path == real and m.info.quant == "Q4_0"
    assert resolve("other").path == real


def test_catalog_missing_file(lbench_env, tmp_path):
    (tmp_path / "catalog.toml").write_text('[models]\ngone = "/nope/gone.gguf"\n')
    with pytest.raises(BadInput, match="missing file"):
        resolve("gone")


def test_unknown_alias_lists_known(lbench_env):
    with pytest.raises(BadInput) as err:
        resolve("llama9-400b-q8")
    text = str(err.value)
    assert "unknown model alias 'llama9-400b-q8'" in text and "tiny-q8" in text and "llama3-8b-q8" in text


def test_bad_catalog_toml(lbench_env, tmp_path):
    (tmp_path / "catalog.toml").write_text("[models\n")
    with pytest.raises(BadInput, match="cannot read the model catalog"):
        resolve("tiny-q8")


def test_path_resolves(lbench_env, tmp_path):
    real = synthesize(presets.get_shape("tiny"), presets.get_quant("f16"), tmp_path / "x.gguf").path
    m = resolve(str(real))
    assert m.source == "file" and m.label == "x"
