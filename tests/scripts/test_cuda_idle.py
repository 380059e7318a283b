"""scripts/device/cuda_idle.sh cannot run here (no NVIDIA GPU; docs/builds.md says it was never run):
its lbench command lines are checked against the current CLI, so an option renamed since is caught."""

import itertools
import re
import shlex
import subprocess

import typer

from conftest import REPO
from harness.cli import app

SCRIPT = REPO / "scripts" / "device" / "cuda_idle.sh"


def _invocations() -> list[list[str]]:
    """The words after ``"${LBENCH[@]}"`` on each line that runs lbench (continuations joined), up to
    the first redirection or ``||``."""
    text = SCRIPT.read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        if '"${LBENCH[@]}"' not in line or line.lstrip().startswith("#"):
            continue
        words = shlex.split(line.split('"${LBENCH[@]}"', 1)[1].replace('"$(nproc)"', "2"), comments=True)
        out.append(list(itertools.takewhile(lambda w: not re.match(r"^(\d?>|>>|\|\||&&)", w), words)))
    return out


def test_the_script_parses_and_runs_engine_install_probes_and_idle():
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
    assert [w[:2] if w[0] == "engine" else w[:1] for w in _invocations()] == [["engine", "install"], ["probes"],
                                                                              ["idle"]]


def test_every_option_it_passes_exists_in_the_current_cli():
    root = typer.main.get_command(app)
    for words in _invocations():
        command, rest = root, list(words)
        while rest and hasattr(command, "commands") and rest[0] in command.commands:
            command = command.commands[rest.pop(0)]
        known = {o for p in command.params for o in (*getattr(p, "opts", []), *getattr(p, "secondary_opts", []))}
        given = [w.split("=", 1)[0] for w in rest if w.startswith("-")]
        assert set(given) <= known, (words, sorted(set(given) - known))
    idle = next(w for w in _invocations() if w[0] == "idle")
    assert "--backend" in idle and idle[idle.index("--backend") + 1] == "cuda"
    assert idle[idle.index("--device-probes") + 1] == "auto"  # probes are off unless asked for
