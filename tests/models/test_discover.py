"""Finding a user's models in the layouts of llama.cpp, Hugging Face, LM Studio and Ollama
(built here with generated GGUF files)."""

import hashlib
import json
import os
from pathlib import Path

import pytest

from harness.errors import BadInput
from harness.models import presets
from harness.models.discover import aliases_from, discover, family_of
from harness.models.resolve import resolve
from harness.models.synth import synthesize


def make(path: Path, basename: str, size: str, quant: str = "q8") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return synthesize(presets.get_shape("tiny"), presets.get_quant(quant), path,
                      extra_metadata={"general.basename": basename, "general.size_label": size}).path


@pytest.fixture
def home(tmp_path, monkeypatch, lbench_env):
    for var in ("LLAMA_CACHE", "HF_HUB_CACHE", "HF_HOME", "OLLAMA_MODELS", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_family_and_aliases():
    assert family_of("Meta-Llama-3.1") == "llama3.1" and family_of("Llama-3.2") == "llama3.2"
    assert family_of("Qwen2.5-Coder") == "qwen2.5-coder"
    assert aliases_from({"general.basename": "Meta-Llama-3", "general.size_label": "8B", "general.file_type": 7}) == [
        "llama3-8b-q8_0", "llama3-8b-q8"]
    assert aliases_from({"general.basename": "Llama-3.2", "general.size_label": "1B", "general.file_type": 15}) == [
        "llama3.2-1b-q4_k_m"]
    assert aliases_from({"general.name": "x"}) == []


def test_finds_every_layout(home):
    make(home / ".cache" / "llama.cpp" / "bartowski_Llama-3.2-1B-Q8_0.gguf", "Llama-3.2", "1B")
    snap = home / ".cache" / "huggingface" / "hub" / "models--meta--Meta-Llama-3-8B-GGUF"
    blob = make(snap / "blobs" / "abc123", "Meta-Llama-3", "8B")
    (snap / "snapshots" / "rev1").mkdir(parents=True)
    os.symlink(blob, snap / "snapshots" / "rev1" / "Meta-Llama-3-8B.Q8_0.gguf")
    make(home / ".lmstudio" / "models" / "lmstudio-community" / "Qwen" / "qwen2.5-7b-q4_0.gguf", "Qwen2.5", "7B", "q4")
    oll = home / ".ollama" / "models"
    data = make(oll / "tmp.gguf", "Llama-3.2", "3B", "q4")
    digest = hashlib.sha256(data.read_bytes()).hexdigest()
    (oll / "blobs").mkdir(parents=True)
    data.rename(oll / "blobs" / f"sha256-{digest}")
    manifest = oll / "manifests" / "registry.ollama.ai" / "library" / "llama3.2" / "3b"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"layers": [
        {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "0" * 64},
        {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}"}]}))
    found = {f.source: f for f in discover()}
    assert set(found) == {"llama.cpp cache", "hugging face hub", "lm studio", "ollama"}
    assert "llama3.2-1b-q8" in found["llama.cpp cache"].aliases
    assert "llama3-8b-q8" in found["hugging face hub"].aliases
    assert "qwen2.5-7b-q4" in found["lm studio"].aliases
    assert found["ollama"].name == "llama3.2:3b" and "llama3.2-3b-q4" in found["ollama"].aliases
    # resolution prefers the real file over the synthetic preset
    m = resolve("llama3-8b-q8")
    assert m.source == "discovered (hugging face hub)" and not m.path.name.startswith("synthetic")


def test_ambiguous_alias_lists_candidates(home):
    make(home / ".cache" / "llama.cpp" / "a.gguf", "Meta-Llama-3", "8B")
    make(home / ".lmstudio" / "models" / "x" / "b.gguf", "Meta-Llama-3", "8B")
    with pytest.raises(BadInput, match="matches 2 models") as err:
        resolve("llama3-8b-q8")
    assert "a.gguf" in str(err.value) and "b.gguf" in str(err.value)


def test_no_match_suggests_the_synthetic_stand_in(home):
    with pytest.raises(BadInput) as err:
        resolve("llama3.1-8b-q4_k_m")
    assert "synthetic stand-in is 'llama3-8b-q4'" in str(err.value)
