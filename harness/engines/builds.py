"""Engine builds as a factor: resolve ``--build N`` to the cached llama-server of that build."""

from __future__ import annotations

from harness.engines import provision
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


def binaries(builds: list[int] | None, explicit: str | None) -> list[Binary]:
    """One binary per ``--build`` (in the order given), or the usual one."""
    if builds and explicit:
        raise BadInput("--build and --llama-server exclude each other", where="command line",
                       hint="pick builds from the cache with --build, or one binary with --llama-server")
    if not builds:
        return [locate(explicit)]
    return [binary_for_build(b) for b in dict.fromkeys(builds)]
