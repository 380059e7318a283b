"""Find the user's GGUF models and give them aliases from their metadata.

Places searched (each may be moved by its tool's variable):
- llama.cpp's cache: ``$LLAMA_CACHE``, else ``~/Library/Caches/llama.cpp`` (macOS) or
  ``$XDG_CACHE_HOME/llama.cpp`` / ``~/.cache/llama.cpp``;
- the Hugging Face hub cache: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
  ``~/.cache/huggingface/hub`` (``models--org--name/snapshots/<rev>/*.gguf``);
- LM Studio: ``~/.lmstudio/models`` and the older ``~/.cache/lm-studio/models``;
- Ollama: ``$OLLAMA_MODELS``, else ``~/.ollama/models``: each manifest under
  ``manifests/`` names its model layer (``application/vnd.ollama.image.model``),
  whose blob ``blobs/sha256-<hex>`` is the GGUF.

Aliases come from GGUF metadata: family from ``general.basename`` (or ``general.name``),
size from ``general.size_label``, quantization from ``general.file_type``:
``Meta-Llama-3-8B`` Q8_0 -> ``llama3-8b-q8_0`` and ``llama3-8b-q8``.  Metadata reads
are cached by (path, size, mtime): a 128k-token vocabulary takes seconds to parse.
"""

from __future__ import annotations

import json
import os
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path

import gguf

from harness.filecache import FileKeyedCache
from harness.models.gguf_bounds import check_header

MODEL_LAYER = "application/vnd.ollama.image.model"


@dataclass
class Found:
    path: Path
    source: str
    aliases: list[str] = field(default_factory=list)
    name: str = ""
    bytes: int = 0
    note: str = ""


def search_roots() -> list[tuple[str, Path]]:
    home = Path.home()
    env = os.environ
    roots: list[tuple[str, Path]] = []
    if env.get("LLAMA_CACHE"):
        roots.append(("llama.cpp cache", Path(env["LLAMA_CACHE"])))
    elif platform.system() == "Darwin":
        roots.append(("llama.cpp cache", home / "Library" / "Caches" / "llama.cpp"))
    else:
        xdg = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else home / ".cache"
        roots.append(("llama.cpp cache", xdg / "llama.cpp"))
    if env.get("HF_HUB_CACHE"):
        roots.append(("hugging face hub", Path(env["HF_HUB_CACHE"])))
    elif env.get("HF_HOME"):
        roots.append(("hugging face hub", Path(env["HF_HOME"]) / "hub"))
    else:
        roots.append(("hugging face hub", home / ".cache" / "huggingface" / "hub"))
    roots.append(("lm studio", home / ".lmstudio" / "models"))
    roots.append(("lm studio", home / ".cache" / "lm-studio" / "models"))
    roots.append(("ollama", Path(env["OLLAMA_MODELS"]) if env.get("OLLAMA_MODELS") else home / ".ollama" / "models"))
    return roots


def _ollama_models(root: Path) -> list[tuple[Path, str]]:
    out: list[tuple[Path, str]] = []
    manifests = root / "manifests"
    if not manifests.is_dir():
        return out
    for manifest in manifests.rglob("*"):
        if not manifest.is_file():
            continue
        try:
            layers = json.loads(manifest.read_text()).get("layers", [])
        except (OSError, ValueError):
            continue
        for layer in layers:
            if layer.get("mediaType") == MODEL_LAYER and str(layer.get("digest", "")).startswith("sha256:"):
                blob = root / "blobs" / ("sha256-" + layer["digest"].split(":", 1)[1])
                if blob.is_file():
                    rel = manifest.relative_to(manifests).parts
                    out.append((blob, f"{rel[-2]}:{rel[-1]}" if len(rel) >= 2 else manifest.name))
    return out


METADATA_CACHE = FileKeyedCache("gguf-metadata-cache")


def _metadata(path: Path) -> dict:
    cached = METADATA_CACHE.get(path)
    if cached is not None:
        return cached
    meta: dict = {}
    try:
        check_header(path)  # a crafted header must not make discovery hang or eat memory
        reader = gguf.GGUFReader(path, "r")
        for k in ("general.basename", "general.name", "general.size_label", "general.file_type",
                  "general.architecture"):
            f = reader.get_field(k)
            if f is not None:
                meta[k] = f.contents()
    except Exception as exc:  # a damaged file is listed, without aliases
        meta["error"] = f"{type(exc).__name__}: {exc}"
    METADATA_CACHE.put(path, meta)
    return meta


def family_of(name: str) -> str:
    """'Meta-Llama-3.1' -> 'llama3.1'; 'Llama-3.2' -> 'llama3.2'; 'Qwen2.5-Coder' -> 'qwen2.5-coder'."""
    s = name.lower().strip()
    s = re.sub(r"^meta[-_ ]", "", s)
    s = re.sub(r"[-_ ](instruct|chat|it|base|gguf)$", "", s)
    s = re.sub(r"([a-z])[-_ ](\d)", r"\1\2", s)
    return re.sub(r"[\s_]+", "-", s)


def aliases_from(meta: dict) -> list[str]:
    base = meta.get("general.basename") or meta.get("general.name")
    size = meta.get("general.size_label")
    ftype = meta.get("general.file_type")
    if not base or ftype is None:
        return []
    try:
        quant = gguf.LlamaFileType(int(ftype)).name.removeprefix("MOSTLY_").lower()
    except ValueError:
        return []
    family = family_of(str(base))
    if size and str(size).lower() in family:  # basename sometimes carries the size already
        family = family.replace("-" + str(size).lower(), "")
    stem = f"{family}-{str(size).lower()}" if size else family
    out = [f"{stem}-{quant}"]
    short = re.sub(r"^(q\d)_0$", r"\1", quant)  # q8_0 -> q8, q4_0 -> q4: the synthetic presets' spelling
    if short != quant:
        out.append(f"{stem}-{short}")
    return out


def discover() -> list[Found]:
    found: list[Found] = []
    seen: set[Path] = set()
    for source, root in search_roots():
        if not root.is_dir():
            continue
        candidates = _ollama_models(root) if source == "ollama" else [(p, p.stem) for p in root.rglob("*.gguf")]
        for path, name in candidates:
            real = path.resolve()
            if real in seen or not real.is_file() or "mmproj" in path.name.lower():
                continue
            seen.add(real)
            meta = _metadata(real)
            found.append(Found(path, source, aliases_from(meta), name, real.stat().st_size, meta.get("error", "")))
    return found


def matches(alias: str, found: list[Found]) -> list[Found]:
    a = alias.lower()
    return [f for f in found if a in f.aliases]
