"""scripts/setup.sh: which Python and build tools it picks, what it says when one is missing, the .venv it
replaces, and its optional system packages (ccache, chromium: installed only when missing, never failing setup).

The interpreters, cmake, the compiler, ``uname`` (for a Mac), ``brew`` and ``xcode-select`` are small shell
scripts on a PATH of their own (a python stub prints what ``python3.12 --version`` prints); setup runs with
``--check``, which stops after the selection and changes nothing: no network, no venv, no build here.
None of this ran on a Mac; the Darwin cases stand ``uname`` in for one."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BASH = shutil.which("bash") or "/bin/bash"
SYSTEM_TOOLS = ("dirname", "rm")  # what setup.sh runs besides the tools under test


def stub(bin_dir: Path, name: str, body: str) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def python_stub(bin_dir: Path, name: str, version: str) -> Path:
    return stub(bin_dir, name, f'echo "Python {version}"')


def checkout(tmp_path: Path) -> Path:
    """A copy of setup.sh in a repository of its own (setup.sh works in its parent folder)."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "setup.sh", repo / "scripts" / "setup.sh")
    return repo


def toolbox(tmp_path: Path, *, system: str = "Linux", cmake: bool = True, compiler: bool = True,
            make: bool = True, brew: bool = False, clt: bool = True, apt: bool = False) -> Path:
    """A PATH folder holding only the stand-ins asked for (and the system tools setup.sh needs)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    for tool in SYSTEM_TOOLS:
        real = shutil.which(tool)
        assert real is not None, tool
        (bin_dir / tool).symlink_to(real)
    stub(bin_dir, "uname", f"echo {system}")
    if cmake:
        stub(bin_dir, "cmake", "echo 'cmake version 3.31.6'")
    if compiler:
        stub(bin_dir, "c++", "exit 0")
    if make:
        stub(bin_dir, "make", "exit 0")
    if brew:
        stub(bin_dir, "brew", "exit 0")
    if system == "Darwin":
        stub(bin_dir, "xcode-select", "echo /Library/Developer/CommandLineTools" if clt else
             "echo 'xcode-select: error: unable to get active developer directory' >&2; exit 2")
    if apt:
        stub(bin_dir, "apt-get", "exit 0")
    return bin_dir


def setup_check(repo: Path, path: list[Path], brew_dirs: list[Path] = (), **env: str
                ) -> subprocess.CompletedProcess[str]:
    environ = {"PATH": os.pathsep.join(str(p) for p in path), "HOME": str(repo),
               "LBENCH_SETUP_BREW_DIRS": " ".join(str(d) for d in brew_dirs), **env}
    return subprocess.run([BASH, str(repo / "scripts" / "setup.sh"), "--check"], capture_output=True, text=True,
                          env=environ, timeout=60)


def test_a_python_of_at_least_3_11_is_chosen_over_an_older_python3(tmp_path):
    tools = toolbox(tmp_path)
    pythons = tmp_path / "pythons"
    python_stub(pythons, "python3", "3.9.6")  # macOS's /usr/bin/python3
    python_stub(pythons, "python3.9", "3.9.6")
    chosen = python_stub(pythons, "python3.12", "3.12.4")
    proc = setup_check(checkout(tmp_path), [tools, pythons])
    assert proc.returncode == 0, proc.stderr
    assert f"python: {chosen} (Python 3.12.4)" in proc.stdout
    assert "venv: making .venv" in proc.stdout


def test_python3_itself_is_used_when_it_is_new_enough(tmp_path):
    tools = toolbox(tmp_path)
    chosen = python_stub(tmp_path / "pythons", "python3", "3.13.1")
    proc = setup_check(checkout(tmp_path), [tools, tmp_path / "pythons"])
    assert proc.returncode == 0, proc.stderr
    assert f"python: {chosen} (Python 3.13.1)" in proc.stdout


def test_homebrews_prefix_is_searched_when_path_has_only_an_old_python(tmp_path):
    tools = toolbox(tmp_path, system="Darwin", brew=True)
    python_stub(tmp_path / "pythons", "python3", "3.9.6")
    brew_bin = tmp_path / "opt-homebrew-bin"
    chosen = python_stub(brew_bin, "python3.12", "3.12.8")
    proc = setup_check(checkout(tmp_path), [tools, tmp_path / "pythons"], brew_dirs=[brew_bin])
    assert proc.returncode == 0, proc.stderr
    assert f"python: {chosen} (Python 3.12.8)" in proc.stdout


def test_only_python_3_9_on_a_mac_says_to_brew_install_python_and_changes_nothing(tmp_path):
    tools = toolbox(tmp_path, system="Darwin", brew=True)
    python_stub(tmp_path / "pythons", "python3", "3.9.6")
    python_stub(tmp_path / "pythons", "python3.9", "3.9.6")
    repo = checkout(tmp_path)
    proc = setup_check(repo, [tools, tmp_path / "pythons"])
    assert proc.returncode == 2
    assert "missing: python (nothing was changed)" in proc.stderr
    assert "brew install python@3.12" in proc.stderr
    assert not (repo / ".venv").exists()


def test_no_python_on_debian_names_the_apt_command(tmp_path):
    proc = setup_check(checkout(tmp_path), [toolbox(tmp_path, apt=True)])
    assert proc.returncode == 2
    assert "sudo apt-get install -y python3.11 python3.11-venv" in proc.stderr


def test_an_old_python_given_in_lbench_python_is_refused(tmp_path):
    tools = toolbox(tmp_path)
    old = python_stub(tmp_path / "pythons", "python3", "3.10.12")
    python_stub(tmp_path / "pythons", "python3.12", "3.12.4")
    proc = setup_check(checkout(tmp_path), [tools, tmp_path / "pythons"], LBENCH_PYTHON=str(old))
    assert proc.returncode == 2
    assert f"LBENCH_PYTHON={old} is Python 3.10.12; lbench needs 3.11 or newer" in proc.stderr


def test_no_cmake_on_a_mac_says_brew_install_cmake_before_anything_is_made(tmp_path):
    tools = toolbox(tmp_path, system="Darwin", cmake=False, brew=True)
    python_stub(tmp_path / "pythons", "python3.12", "3.12.4")
    repo = checkout(tmp_path)
    proc = setup_check(repo, [tools, tmp_path / "pythons"])
    assert proc.returncode == 2
    assert re.search(r"missing: cmake \(nothing was changed\)", proc.stderr)
    assert "cmake: brew install cmake" in proc.stderr
    assert not (repo / ".venv").exists()


def test_no_cmake_and_no_brew_on_a_mac_points_to_homebrew(tmp_path):
    tools = toolbox(tmp_path, system="Darwin", cmake=False)
    python_stub(tmp_path / "pythons", "python3.12", "3.12.4")
    proc = setup_check(checkout(tmp_path), [tools, tmp_path / "pythons"])
    assert proc.returncode == 2
    assert "install Homebrew (https://brew.sh), then: brew install cmake" in proc.stderr


def test_a_mac_without_command_line_tools_is_told_xcode_select_install(tmp_path):
    # /usr/bin/c++ exists on every Mac as a stub until the Command Line Tools are installed
    tools = toolbox(tmp_path, system="Darwin", clt=False, brew=True)
    python_stub(tmp_path / "pythons", "python3.12", "3.12.4")
    proc = setup_check(checkout(tmp_path), [tools, tmp_path / "pythons"])
    assert proc.returncode == 2
    assert "a C++ compiler: xcode-select --install" in proc.stderr


def test_no_cmake_no_compiler_on_debian_names_one_apt_command(tmp_path):
    tools = toolbox(tmp_path, cmake=False, compiler=False, apt=True)
    python_stub(tmp_path / "pythons", "python3.11", "3.11.2")
    proc = setup_check(checkout(tmp_path), [tools, tmp_path / "pythons"])
    assert proc.returncode == 2
    assert "missing: cmake compiler" in proc.stderr
    assert proc.stderr.count("sudo apt-get install -y cmake g++ make") == 2


@pytest.mark.parametrize(("venv_python", "said"), [
    ("3.9.6", "venv: .venv was made by Python 3.9.6: replacing it"),
    ("3.12.4", "venv: .venv (Python 3.12.4) kept"),
])
def test_a_venv_made_by_an_older_python_is_replaced(tmp_path, venv_python, said):
    tools = toolbox(tmp_path)
    python_stub(tmp_path / "pythons", "python3.12", "3.12.4")
    repo = checkout(tmp_path)
    python_stub(repo / ".venv" / "bin", "python", venv_python)
    proc = setup_check(repo, [tools, tmp_path / "pythons"])
    assert proc.returncode == 0, proc.stderr
    assert said in proc.stdout
    assert (repo / ".venv" / "bin" / "python").exists()  # --check changes nothing


def test_a_venv_whose_python_no_longer_runs_is_replaced(tmp_path):
    tools = toolbox(tmp_path)
    python_stub(tmp_path / "pythons", "python3.12", "3.12.4")
    repo = checkout(tmp_path)
    (repo / ".venv" / "bin").mkdir(parents=True)
    (repo / ".venv" / "bin" / "python").symlink_to(tmp_path / "removed-python3.9")
    proc = setup_check(repo, [tools, tmp_path / "pythons"])
    assert proc.returncode == 0, proc.stderr
    assert "venv: .venv was made by Python that does not run: replacing it" in proc.stdout


def test_setup_installs_only_what_lbench_idle_needs_and_test_sh_the_test_extras():
    setup = (REPO / "scripts" / "setup.sh").read_text()
    test = (REPO / "scripts" / "test.sh").read_text()
    assert "pip install --quiet -e .\n" in setup and "[test]" not in setup
    assert test.index("bash scripts/setup.sh") < test.index("pip install --quiet -e '.[test]'") < test.index("-m pytest")


# ---- the optional system packages: apt-get replaced by a recorder on PATH, the function run by bash ----

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the recorder stands in for apt-get run as root")


def function_text() -> str:
    text = (REPO / "scripts" / "setup.sh").read_text()
    match = re.search(r"^apt_install_if_missing\(\) \{.*?^\}", text, flags=re.S | re.M)
    assert match is not None
    return match.group(0)


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


@root_only
def test_present_command_installs_nothing(tmp_path):
    assert run(tmp_path, "bash", 0) == []


@root_only
def test_missing_command_is_installed_with_apt_get(tmp_path):
    assert run(tmp_path, "no-such-command-lbench", 0) == ["install -y -qq some-package"]


@root_only
def test_failed_install_updates_the_lists_once_and_retries_then_carries_on(tmp_path):
    assert run(tmp_path, "no-such-command-lbench", 100) == ["install -y -qq some-package", "update -qq"]
