"""Facts about the machine a run happens on (for the manifest and the report).

Read once, before measuring; nothing here runs during a sweep.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import psutil

from harness.probes import macos
from harness.probes.memory import nvidia_facts


def cpu_model() -> str:
    system = platform.system()
    if system == "Darwin":  # host_facts() replaces this with the chip read by probes/macos.py
        return platform.processor() or "unknown"
    if system == "Linux":
        try:
            with open("/proc/cpuinfo") as fh:
                for line in fh:
                    if line.lower().startswith("model name"):
                        return line.split(":", 1)[1].strip()
        except OSError:
            pass
    return platform.processor() or "unknown"


def cgroup_memory_limit() -> int | None:
    """Linux cgroup v2 memory.max in bytes; None when unlimited or not readable."""
    try:
        text = open("/sys/fs/cgroup/memory.max").read().strip()
    except OSError:
        return None
    return None if text == "max" else int(text)


def host_facts() -> dict:
    vm = psutil.virtual_memory()
    facts = {
        "os": platform.system(),
        "os_release": platform.release(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_logical": psutil.cpu_count(logical=True),
        "cpu_physical": psutil.cpu_count(logical=False),
        "ram_bytes": vm.total,
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "hostname": socket.gethostname(),
        "metal": platform.system() == "Darwin" and platform.machine() == "arm64",
    }
    if facts["os"] == "Linux":
        facts["kernel"] = platform.release()
        facts["cgroup_memory_limit_bytes"] = cgroup_memory_limit()
        if sys.platform != "win32":  # (Linux only; the check tells mypy)
            facts["load_avg_1m"] = os.getloadavg()[0]
        facts["virtual"] = _linux_virtual()
    if facts["os"] == "Darwin":
        mac = macos.read_macos_facts() or {}
        facts.update({f"mac_{k}": v for k, v in mac.items() if k != "virtual"})
        facts["macos_version"] = mac.get("macos") or platform.mac_ver()[0]
        facts["virtual"] = bool(mac.get("virtual"))
        if mac.get("chip"):
            facts["cpu_model"] = mac["chip"]
    nv = nvidia_facts()
    if nv:
        facts.update({f"nvidia_{k}": v for k, v in nv.items()})
    return facts


def _linux_virtual() -> bool | None:
    """True when the kernel says it runs under a hypervisor (cpuinfo 'hypervisor' flag)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return " hypervisor" in line
    except OSError:
        return None
    return None


def virtual_mac_warning(host: Mapping[str, Any]) -> str | None:
    if host.get("os") == "Darwin" and host.get("virtual"):
        return (f"this Mac is virtual ({host.get('cpu_model')}, GPU {host.get('mac_gpu_model')}): Metal runs on a "
                "paravirtual device there, unreliably and with a virtual machine's timing, so these numbers say "
                "nothing about idle wake on real Apple Silicon")
    return None


def virtual_status(hosts: Sequence[Mapping[str, Any]]) -> dict:
    """The virtual flag every verdict and report carries: ``virtual`` True when any run behind it was
    measured on a virtual machine, False when every host said it was not, None when one did not say;
    ``note`` the sentence to show (None when no run was virtual)."""
    flags = [h.get("virtual") for h in hosts]
    virtual = True if any(f is True for f in flags) else (False if flags and all(f is False for f in flags)
                                                            else None)
    note = None
    if virtual:
        which = sorted({f"{h.get('os')} {h.get('cpu_model')}" for h in hosts if h.get("virtual") is True})
        mac = any(h.get("os") == "Darwin" and h.get("virtual") for h in hosts)
        note = (f"measured on a virtual machine ({'; '.join(which)}): timings include the hypervisor's "
                "scheduling" + ("; a virtual Mac's GPU is paravirtual, so nothing here says how Metal wakes on "
                                "real Apple Silicon" if mac else "") + " (virtual: true)")
    return {"virtual": virtual, "note": note}
