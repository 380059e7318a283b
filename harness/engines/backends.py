"""llama.cpp backends as a build axis: the cmake flags of each, and what a build needs first.

``lbench engine install --backend vulkan`` builds the pinned sources with ``-DGGML_VULKAN=ON`` into
their own cache entry (``provision.plan_build(backend=...)``).  Only cpu and vulkan are built and
driven on this project's machines; cuda, hip and sycl are recipes (docs/builds.md says which were
run where), metal is the default on macOS.

Vulkan on Debian 12: the pinned ggml-vulkan.cpp needs Vulkan-Hpp newer than Debian 12's 1.3.239
(``vk::LayerSettingEXT``), so the headers of Debian 13's ``libvulkan-dev`` (1.4.309) and
``spirv-headers`` are fetched with ``apt-get download`` (a private apt state; the system's sources
and packages are untouched) and unpacked into ``<cache>/vulkan-sdk/``; the loader (libvulkan.so.1),
glslc and the lavapipe driver stay the system's (``apt-get install mesa-vulkan-drivers
libvulkan-dev glslc spirv-headers``).  On Debian 13 the system's headers are new enough.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness import paths
from harness.errors import BadInput, EngineError


@dataclass(frozen=True)
class Backend:
    """One backend, every fact lbench keeps of it (so adding a backend is one entry here)."""

    name: str
    cmake_args: tuple[str, ...]  # the first one switches it on (-DGGML_X=ON): CMAKE_ARGS naming it pick it
    summary: str
    run_here: bool  # built and driven on this project's Linux machines (tests, docs figures)
    libraries: tuple[str, ...] = ()  # shared libraries a build of it links (ldd), when lbench did not build it
    device_prefixes: tuple[str, ...] = ()  # its devices' names in --list-devices (Vulkan0, CUDA1, MTL0)
    selects_device_with: str | None = None  # the variable that tells it which device to use
    chooses_device: bool = True  # a run picks one of its devices (--device); cpu and metal use the one there is

    @property
    def switch(self) -> str | None:
        """``GGML_VULKAN=ON``: the cmake switch that names this backend in CMAKE_ARGS."""
        return self.cmake_args[0].removeprefix("-D").upper() if self.cmake_args else None


BACKENDS: dict[str, Backend] = {b.name: b for b in (
    Backend("cpu", (), "ggml's CPU backend (the default on Linux)", True, chooses_device=False),
    Backend("vulkan", ("-DGGML_VULKAN=ON",), "Vulkan (any GPU with a Vulkan driver; Mesa lavapipe as a software "
                                             "device here)", True, libraries=("libvulkan",),
            device_prefixes=("Vulkan",), selects_device_with="GGML_VK_VISIBLE_DEVICES"),
    Backend("cuda", ("-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=native"),
            "NVIDIA CUDA, for the build machine's GPU only (needs nvcc)", False, libraries=("libcudart", "libcublas"),
            device_prefixes=("CUDA",), selects_device_with="CUDA_VISIBLE_DEVICES"),
    Backend("hip", ("-DGGML_HIP=ON",), "AMD ROCm/HIP (needs hipcc; set AMDGPU_TARGETS, e.g. gfx1100)", False,
            libraries=("libamdhip", "libhipblas"), device_prefixes=("ROCm", "HIP"),
            selects_device_with="HIP_VISIBLE_DEVICES"),
    Backend("sycl", ("-DGGML_SYCL=ON", "-DCMAKE_C_COMPILER=icx", "-DCMAKE_CXX_COMPILER=icpx"),
            "Intel oneAPI SYCL (source setvars.sh first)", False, libraries=("libsycl",), device_prefixes=("SYCL",)),
    # a static ggml-metal links Apple's Metal framework (otool -L); Homebrew's GGML_BACKEND_DL build loads
    # libggml-metal.so at run time instead, which --list-devices shows (MTL0)
    Backend("metal", (), "Apple Metal (the default on macOS)", False, libraries=("Metal.framework",),
            device_prefixes=("MTL", "Metal"), chooses_device=False),
)}

# Vulkan-Hpp's vk::LayerSettingEXT, used by the pinned ggml-vulkan.cpp, arrived with header 1.3.261
MIN_VULKAN_HEADER = 261
TRIXIE_PACKAGES = ("libvulkan-dev", "spirv-headers")
TRIXIE_VULKAN = "1.4.309"  # libvulkan-dev in Debian 13 (trixie); the folder is named after it
VK_HEADER_RE = re.compile(r"#define\s+VK_HEADER_VERSION\s+(\d+)")
# arguments prepare() derives on the build machine (not the user's CMAKE_ARGS)
PREPARED_ARG_PREFIXES = ("-DVulkan_INCLUDE_DIR=", "-DVulkan_LIBRARY=", "-DSPIRV-Headers_DIR=")
GLSLC_OFF_RE = re.compile(r"--\s+(GL_\w+) not supported by glslc")


def names() -> list[str]:
    return list(BACKENDS)


def get(name: str, where: str = "--backend") -> Backend:
    if name not in BACKENDS:
        raise BadInput(f"unknown backend {name!r}", where=where, hint=f"one of: {', '.join(BACKENDS)}")
    return BACKENDS[name]


def header_version(include_dir: Path) -> int | None:
    """VK_HEADER_VERSION of the Vulkan headers under ``include_dir`` (None when absent)."""
    try:
        m = VK_HEADER_RE.search((include_dir / "vulkan" / "vulkan_core.h").read_text(errors="replace"))
    except OSError:
        return None
    return int(m.group(1)) if m else None


def sdk_dir() -> Path:
    """Where lbench unpacks newer Vulkan headers (never the system)."""
    return paths.cache_dir() / "vulkan-sdk" / f"debian13-{TRIXIE_VULKAN}"


def _download_trixie_headers(target: Path, log: Callable[[str], None]) -> None:
    """``apt-get download`` Debian 13's header packages with a private apt state, unpack them into
    ``target``.  The system's sources.list, package lists and installed packages are not touched."""
    if not shutil.which("apt-get") or not shutil.which("dpkg-deb"):
        raise EngineError("the system's Vulkan headers are too old and apt-get is not here to fetch newer ones",
                          hint="install Vulkan headers >= 1.3.261 (e.g. the LunarG SDK) and pass "
                               "CMAKE_ARGS=-DVulkan_INCLUDE_DIR=<its include dir>")
    log("fetching Debian 13's libvulkan-dev and spirv-headers (headers only) into lbench's cache")
    with tempfile.TemporaryDirectory(prefix="lbench-apt-") as tmp:
        t = Path(tmp)
        for d in ("lists/partial", "cache/archives/partial", "debs"):
            (t / d).mkdir(parents=True)
        (t / "sources.list").write_text("deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
                                        "http://deb.debian.org/debian trixie main\n")
        opts = [f"-oDir::Etc::SourceList={t / 'sources.list'}", "-oDir::Etc::SourceParts=/nonexistent",
                f"-oDir::State::Lists={t / 'lists'}", f"-oDir::Cache={t / 'cache'}",
                "-qq"]
        for cmd in (["apt-get", *opts, "update"], ["apt-get", *opts, "download", *TRIXIE_PACKAGES]):
            proc = subprocess.run(cmd, cwd=t / "debs", capture_output=True, text=True)
            if proc.returncode != 0:
                raise EngineError("could not fetch Debian 13's Vulkan header packages",
                                  where=" ".join(cmd) + "\n" + proc.stderr[-1500:],
                                  hint="check that deb.debian.org is reachable, or install Vulkan headers "
                                       ">= 1.3.261 yourself")
        staging = target.with_name(target.name + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for deb in sorted((t / "debs").glob("*.deb")):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(staging)], check=True)
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)


def vulkan_cmake_args(log: Callable[[str], None] = lambda s: None,
                      system_include: Path = Path("/usr/include")) -> tuple[list[str], dict]:
    """The cmake arguments a Vulkan build needs here, and facts for engine.json (header source)."""
    if not shutil.which("glslc"):
        raise EngineError("glslc is not installed (the Vulkan shaders are compiled with it)",
                          hint="apt-get install glslc mesa-vulkan-drivers libvulkan-dev spirv-headers "
                               "(scripts/setup.sh does it where apt can)")
    system = header_version(system_include)
    if system is not None and system >= MIN_VULKAN_HEADER:
        return [], {"vulkan_headers": f"system 1.x.{system}"}
    sdk = sdk_dir()
    if header_version(sdk / "usr" / "include") is None:
        _download_trixie_headers(sdk, log)
    have = header_version(sdk / "usr" / "include")
    if have is None or have < MIN_VULKAN_HEADER:
        raise EngineError(f"the Vulkan headers in {sdk} are too old or missing ({have})",
                          hint=f"remove {sdk} and try again")
    loader = next((p for p in (Path("/usr/lib/x86_64-linux-gnu/libvulkan.so"), Path("/usr/lib/aarch64-linux-gnu/"
                                                                                      "libvulkan.so"))
                   if p.exists()), None)
    args = [f"-DVulkan_INCLUDE_DIR={sdk / 'usr' / 'include'}",
            f"-DSPIRV-Headers_DIR={sdk / 'usr' / 'share' / 'cmake' / 'SPIRV-Headers'}"]
    if loader is not None:
        args.append(f"-DVulkan_LIBRARY={loader}")
    return args, {"vulkan_headers": f"Debian 13 libvulkan-dev 1.4.{have} unpacked in {sdk} "
                                    f"(system headers: {'1.3.' + str(system) if system else 'none'})"}


def shader_extensions_off(configure_log: str) -> list[str]:
    """The GLSL extensions ggml's configure step found glslc lacks (those shader paths are off)."""
    return list(dict.fromkeys(GLSLC_OFF_RE.findall(configure_log)))


def prepare(name: str, log: Callable[[str], None] = lambda s: None) -> tuple[list[str], dict]:
    """(cmake arguments for backend ``name`` on this machine, facts for engine.json)."""
    backend = get(name)
    args = list(backend.cmake_args)
    facts: dict = {}
    if name == "vulkan":
        more, facts = vulkan_cmake_args(log)
        args += more
    return args, facts
