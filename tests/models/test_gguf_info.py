import pytest

from harness.errors import BadInput
from harness.models import presets
from harness.models.gguf_info import file_sha256, read_model_info
from harness.models.synth import synthesize


@pytest.fixture
def tiny(tmp_path):
    return synthesize(presets.get_shape("tiny"), presets.get_quant("q8"), tmp_path / "tiny.gguf").path


def test_missing_file():
    with pytest.raises(BadInput, match="model file not found"):
        read_model_info("/nonexistent/model.gguf")


def test_not_gguf(tmp_path):
    f = tmp_path / "notes.gguf"
    f.write_text("hello, I am text")
    with pytest.raises(BadInput, match="not a GGUF file") as err:
        read_model_info(f)
    assert "expected b'GGUF'" in str(err.value)


@pytest.mark.parametrize("keep", [10, 2000, -100])
def test_truncated(tmp_path, tiny, keep):
    data = tiny.read_bytes()
    f = tmp_path / "cut.gguf"
    f.write_bytes(data[:keep] if keep > 0 else data[:keep])
    with pytest.raises(BadInput, match="truncated"):
        read_model_info(f)


def test_sha256_is_cached(lbench_env, tiny):
    import hashlib

    assert file_sha256(tiny) == hashlib.sha256(tiny.read_bytes()).hexdigest()
    assert file_sha256(tiny) == hashlib.sha256(tiny.read_bytes()).hexdigest()
