"""Shape presets for synthetic models.

Each preset copies the hyperparameters of a real model family (layer count, widths,
heads, vocabulary), so a synthetic model has the same tensor shapes and bytes as the
real one: decode time and memory behave like the real model, only the outputs are
meaningless.  ``tiny`` is for tests.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from harness.errors import BadInput


@dataclass(frozen=True)
class Shape:
    name: str
    family: str  # what the shape copies, for people
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_vocab: int
    n_ctx_train: int
    rope_theta: float
    tied_embeddings: bool
    rms_eps: float = 1e-5
    # the token embedding's quant in the family's published files when it is kept wider than the
    # other weights (SmolLM2-135M-Instruct.Q4_1.gguf: Q8_0); used when the chosen quant is narrower
    embd_quant: str | None = None

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    def tensor_shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        """(gguf name, numpy-order shape) for every tensor, in file order."""
        e, ff, hd = self.n_embd, self.n_ff, self.head_dim
        shapes: list[tuple[str, tuple[int, ...]]] = [("token_embd.weight", (self.n_vocab, e))]
        for i in range(self.n_layer):
            p = f"blk.{i}."
            shapes += [
                (p + "attn_norm.weight", (e,)),
                (p + "attn_q.weight", (self.n_head * hd, e)),
                (p + "attn_k.weight", (self.n_head_kv * hd, e)),
                (p + "attn_v.weight", (self.n_head_kv * hd, e)),
                (p + "attn_output.weight", (e, self.n_head * hd)),
                (p + "ffn_norm.weight", (e,)),
                (p + "ffn_gate.weight", (ff, e)),
                (p + "ffn_up.weight", (ff, e)),
                (p + "ffn_down.weight", (e, ff)),
            ]
        shapes.append(("output_norm.weight", (e,)))
        if not self.tied_embeddings:
            shapes.append(("output.weight", (self.n_vocab, e)))
        return shapes

    def n_params(self) -> int:
        total = 0
        for _, shape in self.tensor_shapes():
            n = 1
            for d in shape:
                n *= d
            total += n
        return total


# Hyperparameters from the families' published config.json files.
SHAPES: dict[str, Shape] = {
    s.name: s
    for s in [
        Shape("tiny", "test-only toy", n_embd=64, n_layer=2, n_head=4, n_head_kv=2, n_ff=128,
              n_vocab=320, n_ctx_train=2048, rope_theta=10000.0, tied_embeddings=False),
        # SmolLM2-135M-Instruct (llama architecture): the real model is `lbench model install smollm2-135m-instruct-q4_1`
        Shape("smollm2-135m", "SmolLM2-135M", n_embd=576, n_layer=30, n_head=9, n_head_kv=3, n_ff=1536,
              n_vocab=49152, n_ctx_train=8192, rope_theta=100000.0, tied_embeddings=True, embd_quant="q8"),
        Shape("llama3.2-1b", "Llama-3.2-1B", n_embd=2048, n_layer=16, n_head=32, n_head_kv=8,
              n_ff=8192, n_vocab=128256, n_ctx_train=131072, rope_theta=500000.0,
              tied_embeddings=True),
        Shape("llama3.2-3b", "Llama-3.2-3B", n_embd=3072, n_layer=28, n_head=24, n_head_kv=8,
              n_ff=8192, n_vocab=128256, n_ctx_train=131072, rope_theta=500000.0,
              tied_embeddings=True),
        Shape("llama3-8b", "Llama-3-8B / Llama-3.1-8B", n_embd=4096, n_layer=32, n_head=32,
              n_head_kv=8, n_ff=14336, n_vocab=128256, n_ctx_train=8192, rope_theta=500000.0,
              tied_embeddings=False),
    ]
}


if TYPE_CHECKING:
    import gguf


@dataclass(frozen=True)
class Quant:
    name: str  # as used in aliases
    ggml_type_name: str  # gguf.GGMLQuantizationType member
    file_type_name: str  # gguf.LlamaFileType member

    # gguf (and numpy) are imported on first use, not when the CLI starts
    @property
    def ggml_type(self) -> gguf.GGMLQuantizationType:
        import gguf

        return gguf.GGMLQuantizationType[self.ggml_type_name]

    @property
    def file_type(self) -> gguf.LlamaFileType:
        import gguf

        return gguf.LlamaFileType[self.file_type_name]


QUANTS: dict[str, Quant] = {
    "f16": Quant("f16", "F16", "MOSTLY_F16"),
    "q8": Quant("q8", "Q8_0", "MOSTLY_Q8_0"),
    "q4": Quant("q4", "Q4_0", "MOSTLY_Q4_0"),
    "q4_1": Quant("q4_1", "Q4_1", "MOSTLY_Q4_1"),
}
QUANT_SYNONYMS = {"q8_0": "q8", "q4_0": "q4", "fp16": "f16"}


def get_shape(name: str) -> Shape:
    try:
        return SHAPES[name]
    except KeyError:
        raise BadInput(
            f"unknown shape preset {name!r}",
            hint=f"use one of: {', '.join(SHAPES)}",
        ) from None


def get_quant(name: str) -> Quant:
    key = QUANT_SYNONYMS.get(name.lower(), name.lower())
    try:
        return QUANTS[key]
    except KeyError:
        raise BadInput(
            f"unknown quantization {name!r}",
            hint=f"use one of: {', '.join(QUANTS)} (also q8_0, q4_0)",
        ) from None


def synthetic_aliases() -> list[str]:
    return [f"{s}-{q}" for s in SHAPES for q in QUANTS]


MAX_EXTRA_LAYERS = 64


def deeper(shape: Shape, extra_layers: int) -> Shape:
    """The shape with ``extra_layers`` more transformer blocks (named ``<shape>+<k>l``): every
    block has the same tensors, so decode does about k/n_layer more per-layer work.  A slowdown
    of known mechanism for the gate benchmark; its true size is measured, not assumed."""
    return replace(shape, name=f"{shape.name}+{extra_layers}l", family=f"{shape.family}, {extra_layers} extra layers",
                   n_layer=shape.n_layer + extra_layers)


def _parse_shape(head: str) -> Shape | None:
    if head in SHAPES:
        return SHAPES[head]
    base, plus, extra = head.rpartition("+")
    if plus and base in SHAPES and extra.endswith("l") and extra[:-1].isdigit():
        k = int(extra[:-1])
        if 1 <= k <= MAX_EXTRA_LAYERS:
            return deeper(SHAPES[base], k)
    return None


def parse_synthetic_alias(alias: str) -> tuple[Shape, Quant] | None:
    """``llama3-8b-q8`` -> (shape, quant); ``llama3.2-1b+2l-q4`` -> the 1B shape with 2 more
    layers; None when it is not a synthetic alias."""
    head, sep, tail = alias.lower().rpartition("-")
    if not sep:
        return None
    quant_key = QUANT_SYNONYMS.get(tail, tail)
    shape = _parse_shape(head)
    if shape is not None and quant_key in QUANTS:
        return shape, QUANTS[quant_key]
    return None


def tensor_quant(shape: Shape, quant: Quant, name: str) -> Quant:
    """The quant of a 2-D tensor: the chosen one, except a token embedding the family keeps wider."""
    import gguf

    if name == "token_embd.weight" and shape.embd_quant is not None:
        wide = QUANTS[shape.embd_quant]
        bits = {q.name: gguf.GGML_QUANT_SIZES[q.ggml_type][1] / gguf.GGML_QUANT_SIZES[q.ggml_type][0]
                for q in (quant, wide)}
        if bits[wide.name] > bits[quant.name]:
            return wide
    return quant


def expected_bytes(shape: Shape, quant: Quant) -> int:
    """Bytes of tensor data (not counting header and padding)."""
    import gguf

    total = 0
    for name, dims in shape.tensor_shapes():
        n = 1
        for d in dims:
            n *= d
        if len(dims) == 1:
            total += 4 * n
        else:
            block, type_size = gguf.GGML_QUANT_SIZES[tensor_quant(shape, quant, name).ggml_type]
            total += n // block * type_size
    return total
