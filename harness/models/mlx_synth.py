"""Synthetic MLX models: a directory mlx-lm loads as a llama model.

``config.json`` (model_type llama, the preset's shape), ``model.safetensors`` with
random float16 weights under mlx-lm's llama names (written with the ``safetensors``
library), and a word-level tokenizer built locally with ``tokenizers``
(``tokenizer.json`` + ``tokenizer_config.json``), so nothing is fetched from a hub.
The same shape presets as the GGUF generator; weights are float16 only.
``lbench_synthetic.json`` marks the directory as synthetic.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import psutil

from harness import paths
from harness.errors import BadInput
from harness.models.presets import Shape

MARKER = "lbench_synthetic.json"


def mlx_dir(shape: Shape, seed: int = 0) -> Path:
    return paths.models_dir() / f"mlx-synthetic-{shape.name}-f16-seed{seed}"


def _tokenizer(n_vocab: int, out: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["<unk>", "<s>", "</s>", "Hello", "world", "this", "is", "an", "idle", "wake", "probe", "swap", ",", "."]
    vocab = {w: i for i, w in enumerate(words)}
    for i in range(len(words), n_vocab):
        vocab[f"tok{i}"] = i
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "model_max_length": 1 << 20}, indent=2))


def _weights(shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
    names = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight", "attn_norm.weight": "input_layernorm.weight",
             "ffn_norm.weight": "post_attention_layernorm.weight", "attn_q.weight": "self_attn.q_proj.weight",
             "attn_k.weight": "self_attn.k_proj.weight", "attn_v.weight": "self_attn.v_proj.weight",
             "attn_output.weight": "self_attn.o_proj.weight", "ffn_gate.weight": "mlp.gate_proj.weight",
             "ffn_up.weight": "mlp.up_proj.weight", "ffn_down.weight": "mlp.down_proj.weight"}
    out: dict[str, np.ndarray] = {}
    for gguf_name, dims in shape.tensor_shapes():
        if gguf_name.startswith("blk."):
            _, layer, rest = gguf_name.split(".", 2)
            name = f"model.layers.{layer}.{names[rest]}"
        else:
            name = names[gguf_name]
        if len(dims) == 1:
            out[name] = np.ones(dims, dtype=np.float16)
        else:
            out[name] = (rng.standard_normal(dims, dtype=np.float32) * 0.02).astype(np.float16)
    return out


def synthesize_mlx(shape: Shape, *, seed: int = 0, out: Path | None = None) -> Path:
    from safetensors.numpy import save_file

    out = out or mlx_dir(shape, seed)
    if (out / MARKER).is_file():
        return out
    need = shape.n_params() * 2
    if need * 2 > psutil.virtual_memory().available:
        raise BadInput(f"generating MLX {shape.name} needs ~{2 * need / 1e9:.1f} GB of RAM", where="--model",
                       hint="use a smaller shape preset for MLX (tiny, llama3.2-1b)")
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": shape.n_embd,
              "num_hidden_layers": shape.n_layer, "intermediate_size": shape.n_ff,
              "num_attention_heads": shape.n_head, "num_key_value_heads": shape.n_head_kv,
              "head_dim": shape.head_dim, "rms_norm_eps": shape.rms_eps, "vocab_size": shape.n_vocab,
              "rope_theta": shape.rope_theta, "tie_word_embeddings": shape.tied_embeddings,
              "max_position_embeddings": shape.n_ctx_train, "torch_dtype": "float16"}
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    save_file(_weights(shape, np.random.default_rng(seed)), str(tmp / "model.safetensors"),
              metadata={"format": "mlx", "lbench_synthetic": "true", "lbench_preset": shape.name})
    _tokenizer(shape.n_vocab, tmp)
    (tmp / MARKER).write_text(json.dumps({"synthetic": True, "preset": shape.name, "family": shape.family,
                                          "seed": seed, "dtype": "float16"}, indent=2))
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


def mlx_info(path: Path) -> dict:
    """What an MLX model directory is (for the manifest)."""
    if not (path / "config.json").is_file():
        raise BadInput(f"not an MLX model directory (no config.json): {path}",
                       hint="give a directory with config.json, *.safetensors and a tokenizer, or a preset "
                            "alias such as tiny-f16")
    config = json.loads((path / "config.json").read_text())
    marker = path / MARKER
    synthetic = json.loads(marker.read_text()) if marker.is_file() else {}
    size = sum(f.stat().st_size for f in path.glob("*.safetensors"))
    return {"path": str(path.resolve()), "bytes": size, "arch": config.get("model_type", "unknown"),
            "name": path.name, "n_params": None, "quant": str(config.get("quantization", "float16")),
            "n_layer": config.get("num_hidden_layers"), "n_embd": config.get("hidden_size"),
            "synthetic": bool(synthetic), "preset": synthetic.get("preset")}
