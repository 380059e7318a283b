import hashlib

import gguf
import pytest

from harness.errors import BadInput
from harness.models import presets
from harness.models.gguf_info import read_model_info
from harness.models.synth import synthesize


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("quant", ["f16", "q8", "q4"])
def test_tiny_model_is_valid_gguf_with_synthetic_metadata(tmp_path, quant):
    shape, q = presets.get_shape("tiny"), presets.get_quant(quant)
    result = synthesize(shape, q, tmp_path / "m.gguf", seed=1)
    assert result.sha256 == sha(result.path)
    info = read_model_info(result.path)
    assert info.arch == "llama" and info.synthetic and info.preset == "tiny"
    assert info.n_params == shape.n_params()
    assert info.quant == q.file_type.name.removeprefix("MOSTLY_")
    reader = gguf.GGUFReader(result.path)
    weight = next(t for t in reader.tensors if t.name == "blk.0.ffn_up.weight")
    assert weight.tensor_type == q.ggml_type
    data_bytes = sum(int(t.n_bytes) for t in reader.tensors)
    assert data_bytes == presets.expected_bytes(shape, q)
    assert "SYNTHETIC" in reader.get_field("general.description").contents()


def test_deterministic_for_a_seed(tmp_path):
    shape, q = presets.get_shape("tiny"), presets.get_quant("q8")
    a = synthesize(shape, q, tmp_path / "a.gguf", seed=7)
    b = synthesize(shape, q, tmp_path / "b.gguf", seed=7)
    c = synthesize(shape, q, tmp_path / "c.gguf", seed=8)
    assert a.sha256 == b.sha256 != c.sha256
    assert not list(tmp_path.glob("*.partial"))


def test_real_family_shapes():
    l8 = presets.get_shape("llama3-8b")
    assert 7.9e9 < l8.n_params() < 8.1e9  # Llama-3-8B has 8.03 B parameters
    l1 = presets.get_shape("llama3.2-1b")
    assert 1.2e9 < l1.n_params() < 1.3e9  # Llama-3.2-1B has 1.24 B (tied embeddings)
    # Q8_0 of the 8B is ~8.5 GB, like the real file
    assert 8.0e9 < presets.expected_bytes(l8, presets.get_quant("q8")) < 8.6e9


def test_alias_parsing():
    shape, quant = presets.parse_synthetic_alias("llama3-8b-q8")
    assert shape.name == "llama3-8b" and quant.name == "q8"
    assert presets.parse_synthetic_alias("tiny-q4_0")[1].name == "q4"
    assert presets.parse_synthetic_alias("mistral-7b-q8") is None
    assert "tiny-q8" in presets.synthetic_aliases()
    with pytest.raises(BadInput, match="unknown quantization"):
        presets.get_quant("q3")
