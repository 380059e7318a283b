"""scripts/setup.sh's optional system packages (ccache, chromium): installed only when missing, never failing
setup.  apt-get is replaced by a recorder on PATH; the function is the one in setup.sh, run by bash."""

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the recorder stands in for apt-get run as root")


def function_text() -> str:
    text = (REPO / "scripts" / "setup.sh").read_text()
    return re.search(r"^apt_install_if_missing\(\) \{.*?^\}", text, flags=re.S | re.M).group(0)


def run(tmp_path, command: str, apt_exit: int) -> list[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "apt.log"
    (bin_dir / "apt-get").write_text(f'#!/bin/sh\necho "$@" >> {log}\nexit {apt_exit}\n')
    (bin_dir / "apt-get").chmod(0o755)
    script = f"set -euo pipefail\n{function_text()}\napt_install_if_missing {command} some-package\necho done\n"
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr  # never fails setup
    return log.read_text().splitlines() if log.exists() else []


def test_present_command_installs_nothing(tmp_path):
    assert run(tmp_path, "bash", 0) == []


def test_missing_command_is_installed_with_apt_get(tmp_path):
    assert run(tmp_path, "no-such-command-lbench", 0) == ["install -y -qq some-package"]


def test_failed_install_updates_the_lists_once_and_retries_then_carries_on(tmp_path):
    assert run(tmp_path, "no-such-command-lbench", 100) == ["install -y -qq some-package", "update -qq"]
