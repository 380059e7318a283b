"""``lbench probes``: which device probes exist on this machine, and why the others do not."""

from __future__ import annotations

import typer

from harness.cli.ui import out, print_wrapped


def probes(
    check: str = typer.Option(None, "--check",
                              help="Exit 2 unless these probes are available, e.g. --check nvml,fdinfo."),
) -> None:
    """List the device probes (NVML, DRM sysfs, DRM fdinfo, Vulkan budget, Apple, the server process)
    that idle runs sample through each pause with --device-probes, each as available or not
    available with the reason.

    \b
    Examples:
      lbench probes
      lbench probes --check drm,fdinfo
    """
    from harness.probes.devices import registry

    status = registry.describe()
    for name in registry.SOURCES:
        print_wrapped(out, f"{name:8} {status[name]}", rest="         ")
    chosen = registry.select(check or "auto", status, where="--check")
    print_wrapped(out, f"sampled with --device-probes auto: {', '.join(chosen) or 'none'} (the default is off: "
                       "docs/probes.md, Perturbation)", rest="  ")
