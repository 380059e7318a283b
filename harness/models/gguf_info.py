"""Read what a GGUF file is (arch, params, quant, bytes) and reject bad files.

Uses ``gguf.GGUFReader`` (memory-mapped, reads only the header and index).  A file
that is not GGUF, or whose tensor data runs past its end (truncated), is bad input.
Results for good files are cached by (path, size, mtime).
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gguf

from harness.errors import BadInput
from harness.filecache import FileKeyedCache
from harness.models.gguf_bounds import HeaderError, check_header
from harness.models.synth import SYNTHETIC_KEY

GGUF_MAGIC = b"GGUF"
MODEL_INFO_CACHE = FileKeyedCache("model-info-cache")  # parsing a 128k-token vocabulary takes seconds


@dataclass(frozen=True)
class ModelInfo:
    path: str
    bytes: int
    arch: str
    name: str
    n_params: int
    quant: str  # general.file_type's name, else the most common weight type
    n_layer: int | None
    n_embd: int | None
    synthetic: bool
    preset: str | None
    n_ctx_train: int | None = None  # <arch>.context_length: the context the model was trained for

    def as_dict(self) -> dict:
        return asdict(self)


def _field(reader: gguf.GGUFReader, key: str) -> Any:  # a GGUF value: text, a number or a list (gguf: Any)
    field = reader.get_field(key)
    if field is None:
        return None
    return field.contents()


def _positive_int(value: Any) -> int | None:  # a GGUF value as _field reads it
    try:
        n = int(value)
    except (TypeError, ValueError):
        return None
    return n if n > 0 else None


def read_model_info(path: str | os.PathLike[str]) -> ModelInfo:
    p = Path(path)
    if not p.exists():
        raise BadInput(f"model file not found: {p}", hint="check the path, or use an alias (lbench model list)")
    if not p.is_file():
        raise BadInput(f"model path is not a file: {p}", hint="point --model at a .gguf file")
    size = p.stat().st_size
    with p.open("rb") as fh:
        magic = fh.read(4)
    if magic != GGUF_MAGIC:
        raise BadInput(
            f"not a GGUF file: {p}",
            where=f"first bytes are {magic!r}, expected b'GGUF'",
            hint="pass a .gguf model (lbench model synth makes one)",
        )
    cached = MODEL_INFO_CACHE.get(p)
    if cached is not None and "n_ctx_train" in cached:  # same path, size and mtime: read and found good before
        return ModelInfo(**cached)
    try:
        check_header(p)  # bound every count before the reader trusts it
        reader = gguf.GGUFReader(p, "r")
    except HeaderError as exc:
        raise BadInput(f"damaged or crafted GGUF header: {p}", where=str(exc),
                       hint="re-download or regenerate the file") from None
    except Exception as exc:  # the library raises several types for damaged headers
        raise BadInput(
            f"damaged or truncated GGUF file: {p}",
            where=f"gguf reader: {type(exc).__name__}: {exc}",
            hint="re-download or regenerate the file",
        ) from None
    end = 0
    for t in reader.tensors:
        end = max(end, int(t.data_offset) + int(t.n_bytes))
    if end > size:
        raise BadInput(
            f"truncated GGUF file: {p}",
            where=f"tensor data ends at byte {end} but the file has {size} bytes",
            hint="re-download or regenerate the file",
        )
    arch = _field(reader, "general.architecture") or "unknown"
    file_type = _field(reader, "general.file_type")
    if file_type is not None:
        try:
            quant = gguf.LlamaFileType(int(file_type)).name.removeprefix("MOSTLY_")
        except ValueError:
            quant = f"file_type_{file_type}"
    else:
        weights = Counter(t.tensor_type.name for t in reader.tensors if len(t.shape) > 1)
        quant = weights.most_common(1)[0][0] if weights else "unknown"
    synthetic = bool(_field(reader, SYNTHETIC_KEY))
    info = ModelInfo(
        path=str(p.resolve()),
        bytes=size,
        arch=str(arch),
        name=str(_field(reader, "general.name") or p.stem),
        n_params=int(sum(int(t.n_elements) for t in reader.tensors)),
        quant=quant,
        n_layer=_field(reader, f"{arch}.block_count"),
        n_embd=_field(reader, f"{arch}.embedding_length"),
        synthetic=synthetic,
        preset=_field(reader, "lbench.preset") if synthetic else None,
        n_ctx_train=_positive_int(_field(reader, f"{arch}.context_length")),
    )
    MODEL_INFO_CACHE.put(p, info.as_dict())
    return info


SHA256_CACHE = FileKeyedCache("sha256-cache")


def file_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 of a file, cached by (path, size, mtime) so big models hash once."""
    cached = SHA256_CACHE.get(path)
    if cached:
        return cached
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(8 << 20), b""):
            h.update(chunk)
    SHA256_CACHE.put(path, h.hexdigest())
    return h.hexdigest()


def remember_sha256(path: Path, digest: str) -> None:
    """Record a digest computed while writing the file (the synthetic generator does)."""
    SHA256_CACHE.put(path, digest)
