"""Turn ``--model`` (a file path or an alias) into a checked GGUF file.

Aliases come from the user catalog (TOML, see ``harness.paths.catalog_path``)::

    [models]
    llama3-8b-q8 = "~/models/Meta-Llama-3-8B-Instruct.Q8_0.gguf"
    mine = { path = "/data/m.gguf" }

and from the built-in synthetic presets (``<shape>-<quant>``, e.g. ``tiny-q8``,
``llama3-8b-q8``).  A catalog entry wins; a synthetic alias is generated once into
``<cache>/models`` (free disk checked first) and the run says it is synthetic.
"""

from __future__ import annotations

import re
import shutil
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, Unpack

from harness import paths
from harness.engines import registry
from harness.errors import BadInput
from harness.models import discover, packaged, presets
from harness.models.gguf_info import ModelInfo, read_model_info, remember_sha256
from harness.models.synth import synthesize
from harness.units import size_text
from harness.models.mlx_synth import mlx_info, synthesize_mlx

DISK_HEADROOM = 1 << 30


@dataclass(frozen=True)
class ResolvedModel:
    ref: str  # what the user typed
    label: str  # short name used in tables and plots
    path: Path
    source: str  # "file", "catalog", "synthetic", "packaged"
    info: ModelInfo
    origin: dict | None = None  # a packaged model's package(s), version(s) and sha256 (for the manifest)

    @property
    def synthetic(self) -> bool:
        return self.info.synthetic


def load_catalog(path: Path | None = None) -> dict[str, Path]:
    path = path or paths.catalog_path()
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BadInput(f"cannot read the model catalog: {exc}", where=str(path),
                       hint="fix the TOML (see docs/models.md)") from None
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise BadInput("the model catalog's [models] must be a table", where=str(path))
    out: dict[str, Path] = {}
    for alias, value in models.items():
        if isinstance(value, dict):
            value = value.get("path")
        if not isinstance(value, str):
            raise BadInput(f"catalog entry {alias!r} needs a path string", where=str(path),
                           hint=f'write: {alias} = "/path/to/model.gguf"')
        out[alias] = Path(value).expanduser()
    return out


def known_aliases() -> list[str]:
    return sorted(load_catalog()) + list(packaged.PACKAGED) + presets.synthetic_aliases()


def synthetic_path(shape: presets.Shape, quant: presets.Quant, seed: int = 0) -> Path:
    return paths.models_dir() / f"synthetic-{shape.name}-{quant.name}-seed{seed}.gguf"


def _looks_like_path(ref: str) -> bool:
    return "/" in ref or ref.endswith(".gguf") or ref.startswith(".") or ref.startswith("~")


def ensure_synthetic(shape: presets.Shape, quant: presets.Quant, *, seed: int = 0,
                     progress: Callable[[int, int], None] | None = None,
                     announce: Callable[[str], None] = lambda s: None) -> Path:
    out = synthetic_path(shape, quant, seed)
    if out.is_file():
        return out
    need = presets.expected_bytes(shape, quant) + DISK_HEADROOM
    out.parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(out.parent).free
    if free < need:
        raise BadInput(
            f"not enough free disk to generate {shape.name}-{quant.name}: need {need / 1e9:.1f} GB, "
            f"have {free / 1e9:.1f} GB",
            where=str(out.parent),
            hint="free some space or set LBENCH_CACHE_DIR to a bigger disk",
        )
    size = presets.expected_bytes(shape, quant)

    announce(f"generating synthetic model {shape.name}-{quant.name} ({size_text(size)}, once) into {out}")
    result = synthesize(shape, quant, out, seed=seed, progress=progress)
    remember_sha256(result.path, result.sha256)
    return out


def resolve(ref: str, *, progress: Callable[[int, int], None] | None = None,
            announce: Callable[[str], None] = lambda s: None) -> ResolvedModel:
    ref = ref.strip()
    if not ref:
        raise BadInput("empty --model", hint="give a .gguf path or an alias (lbench model list)")
    catalog = load_catalog()
    if ref in catalog:
        path = catalog[ref]
        if not path.exists():
            raise BadInput(f"catalog alias {ref!r} points at a missing file: {path}",
                           where=str(paths.catalog_path()), hint="fix the path in the catalog")
        return ResolvedModel(ref, ref, path, "catalog", read_model_info(path))
    if ref in packaged.PACKAGED:
        return resolve_packaged(packaged.PACKAGED[ref])
    if not _looks_like_path(ref):
        hits = discover.matches(ref, discover.discover())
        if len(hits) > 1:
            raise BadInput(f"alias {ref!r} matches {len(hits)} models", where="discovered model folders",
                           hint="pick one in the catalog (" + str(paths.catalog_path()) + "): "
                                + "; ".join(f"{h.path} ({h.source})" for h in hits))
        if hits:
            h = hits[0]
            announce(f"{ref}: found {h.path} ({h.source})")
            return ResolvedModel(ref, ref, h.path, f"discovered ({h.source})", read_model_info(h.path))
    parsed = presets.parse_synthetic_alias(ref)
    if parsed is not None and not Path(ref).exists():
        shape, quant = parsed
        path = ensure_synthetic(shape, quant, progress=progress, announce=announce)
        label = f"{shape.name}-{quant.name}"
        return ResolvedModel(ref, label, path, "synthetic", read_model_info(path))
    if _looks_like_path(ref) or Path(ref).exists():
        path = Path(ref).expanduser()
        return ResolvedModel(ref, path.stem, path, "file", read_model_info(path))
    suggestion = suggest_synthetic(ref)
    raise BadInput(
        f"unknown model alias {ref!r}",
        where=f"catalog {paths.catalog_path()}, discovered model folders (lbench model list) and the built-in "
              "synthetic presets",
        hint=(f"no such file here; the shape-faithful synthetic stand-in is {suggestion!r}. " if suggestion else "")
        + "known aliases: " + ", ".join(known_aliases()) + "; or pass a path to a .gguf file",
    )


def resolve_packaged(model: packaged.PackagedModel) -> ResolvedModel:
    """A real model from a package: installed by ``lbench model install`` (never downloaded
    during a run)."""
    have = packaged.installed(model)
    if have is None:
        raise BadInput(f"model {model.name!r} is not installed", where=str(packaged.install_dir(model)),
                       hint=f"run: lbench model install {model.name}  (downloads {model.packages} from the "
                            f"package index, {model.bytes / 1e6:.0f} MB, once)")
    return ResolvedModel(model.name, model.name, have.path, "packaged", read_model_info(have.path), have.origin)


def suggest_synthetic(ref: str) -> str | None:
    """'llama3.1-8b-q4_k_m' -> 'llama3-8b-q4': the preset with that size, the nearest quant."""
    r = ref.lower()
    size = re.search(r"(\d+(?:\.\d+)?)b\b", r)
    if not size or "llama" not in r:
        return None
    by_size = {"1": "llama3.2-1b", "3": "llama3.2-3b", "8": "llama3-8b"}
    shape = by_size.get(size.group(1).split(".")[0])
    if shape is None:
        return None
    quant = "q8" if "q8" in r else "q4" if re.search(r"q[2-5]", r) else "f16"
    return f"{shape}-{quant}"


class ResolveOptions(TypedDict, total=False):
    """What ``resolve_for_engine`` takes beside the reference: ``resolve``'s options, and an MLX preset's seed."""

    progress: Callable[[int, int], None] | None
    announce: Callable[[str], None]
    seed: int


def resolve_for_engine(ref: str, engine: str, **kwargs: Unpack[ResolveOptions]) -> ResolvedModel:
    """``--model`` for a given engine: GGUF for llama-server, an MLX directory for mlx,
    a server-side model name for openai and ollama."""
    source = registry.get(engine).model_source
    if source == "mlx-dir":
        path = Path(ref).expanduser()
        if path.is_dir():
            return ResolvedModel(ref, path.name, path, "directory", ModelInfo(**mlx_info(path)))
        parsed = presets.parse_synthetic_alias(ref)
        if parsed is None:
            raise BadInput(f"unknown MLX model {ref!r}", where="--model",
                           hint="give an MLX model directory, or a preset alias: "
                                + ", ".join(f"{s}-f16" for s in presets.SHAPES))
        shape, quant = parsed
        if quant.name != "f16":
            raise BadInput(f"synthetic MLX models are float16: use {shape.name}-f16, not {ref}", where="--model")
        kwargs.get("announce", lambda s: None)(f"using synthetic MLX model {shape.name}-f16 (generated once)")
        seed = int(kwargs.get("seed", 0))
        path = synthesize_mlx(shape, seed=seed)
        label = f"{shape.name}-f16-mlx" + (f"-seed{seed}" if seed else "")
        return ResolvedModel(ref, label, path, "synthetic", ModelInfo(**mlx_info(path)))
    if source == "server-name":
        info = ModelInfo(path=ref, bytes=0, arch="(server-side)", name=ref, n_params=0, quant="(server-side)",
                         n_layer=None, n_embd=None, synthetic=False, preset=None)
        return ResolvedModel(ref, ref, Path(ref), "server", info)
    return resolve(ref, progress=kwargs.get("progress"), announce=kwargs.get("announce", lambda s: None))


def local_file(model: ResolvedModel) -> Path | None:
    """The file whose page-cache state matters: the GGUF, or an MLX directory's largest weights file."""
    if model.source == "server":
        return None
    if model.path.is_dir():
        files = sorted(model.path.glob("*.safetensors"), key=lambda f: f.stat().st_size)
        return files[-1] if files else None
    return model.path if model.path.is_file() else None
