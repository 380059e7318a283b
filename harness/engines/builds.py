"""Engine builds as a factor: resolve ``--build N`` to the cached llama-server of that build."""

from __future__ import annotations

from harness.engines import backends, provision
from harness.engines.binary import Binary, locate
from harness.errors import BadInput


def binary_for_build(build: int) -> Binary:
    """The cached llama-server of llama.cpp build ``build`` (``lbench engine install --build N`` first)."""
    plan = provision.plan_build(build=build)
    if not plan.is_built():
        raise BadInput(f"llama.cpp build {build} is not in the cache", where=f"--build {build}",
                       hint=f"build it first: lbench engine install --build {build}  (several minutes; "
                            "`lbench engine list` shows the cached builds)")
    binary = locate(str(plan.binary("llama-server")))
    if binary.build_number not in (None, build):
        raise BadInput(f"the cached binary for build {build} reports build {binary.build_number}",
                       where=str(plan.binary("llama-server")), hint="rebuild it with --force")
    return binary


def binary_for_backend(backend: str, build: int | None = None) -> Binary:
    """The cached llama-server built for ``backend`` (``lbench engine install --backend B`` first)."""
    backends.get(backend)
    plan = provision.plan_build(build=build, backend=backend)
    if not plan.is_built():
        built = sorted({str(r.get("backend")) for r in provision.list_builds()
                        if build is None or r.get("build_number") == build})
        raise BadInput(f"no {backend} build of llama.cpp {build or provision.BUILD_NUMBER} in the cache",
                       where=f"--backend {backend}",
                       hint=f"build it first: lbench engine install --backend {backend}"
                            + (f" --build {build}" if build else "") + " (docs/builds.md); built backends: "
                            + (", ".join(built) or "none"))
    return locate(str(plan.binary("llama-server")))


def binaries(builds: list[int] | None, explicit: str | None, backend: str | None = None) -> list[Binary]:
    """One binary per ``--build`` (in the order given), or the usual one; ``backend``: that backend's builds."""
    if (builds or backend) and explicit:
        raise BadInput(f"{'--build' if builds else '--backend'} and --llama-server exclude each other",
                       where="command line",
                       hint="pick builds from the cache with --build/--backend, or one binary with --llama-server")
    if backend is not None:
        return [binary_for_backend(backend, b) for b in dict.fromkeys(builds or [None])]  # type: ignore[list-item]
    if not builds:
        return [locate(explicit)]
    return [binary_for_build(b) for b in dict.fromkeys(builds)]


def server_path(backend: str | None, explicit: str | None) -> str | None:
    """--llama-server, or the cached build of ``--backend`` (None: lbench's usual lookup)."""
    return str(binaries(None, explicit, backend)[0].path) if backend else explicit
