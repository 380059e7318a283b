"""The documentation checked against the code, so it cannot go stale.

- docs/cli.md is generated from the Typer app (harness/cli/reference.py) and must match it;
- every `lbench ...` command line in README.md and docs/ names a real command and only
  options that command has, and every engine it names can do what that command needs
  (engine capabilities from harness/engines/registry.py);
- every command is documented; README stays a short newcomer path (<= 10 KB);
- figures that once went stale (calibrate's repetitions, the settle count after a pause,
  the engine build time) are stated where the code says, once.
"""

from __future__ import annotations

import functools
import re
import shlex
from pathlib import Path

import pytest

from harness.cli import reference
from harness.engines import registry

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"


def doc_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


@functools.lru_cache(maxsize=1)
def _root():
    return next(reference.walk())[1]


def _sub(command, name):
    if not hasattr(command, "list_commands"):
        return None
    return command.get_command(reference._context(command), name)


# ------------------------------------------------------------------ generated reference

def test_cli_reference_matches_the_code():
    committed = (DOCS / "cli.md").read_text()
    assert committed == reference.render(), (
        f"docs/cli.md is out of date with the CLI: regenerate it with `{reference.REGENERATE}` "
        "(from the repository root) and commit the result")


def test_cli_reference_lists_every_command_and_option():
    text = reference.render()
    for path, command in list(reference.walk())[1:]:
        name = " ".join(path)
        assert f"## `{name}`" in text
        for param in command.params:
            if getattr(param, "hidden", False) or param.param_type_name != "option":
                continue
            assert f"`{param.opts[0]}" in text.split(f"## `{name}`", 1)[1], (name, param.opts)


def test_every_command_is_documented_in_readme_or_cli_reference():
    readme = README.read_text()
    cli = (DOCS / "cli.md").read_text()
    missing = [p for p in [" ".join(path) for path, _ in reference.walk()][1:] if f"`{p}`" not in cli and p not in readme]
    assert not missing, f"commands documented nowhere: {missing}"


def test_generator_renders_a_new_option_and_command(monkeypatch):
    """The generator walks the app, not a list: a command added to the app shows up."""
    import typer

    from harness import cli

    extra = typer.Typer()

    @extra.command("other")
    def other() -> None:
        """Another command, so the app is a group."""

    @extra.command("frobnicate")
    def frobnicate(level: int = typer.Option(7, "--level", help="How much to frobnicate.")) -> None:
        """Frobnicate the widgets."""

    @extra.callback()
    def main(verbose: bool = typer.Option(False, "--verbose", help="Say more.")) -> None:
        """An app."""

    monkeypatch.setattr(cli, "app", extra)
    text = reference.render()
    assert "## `lbench frobnicate`" in text and "## `lbench other`" in text
    assert "Frobnicate the widgets." in text
    assert "| `--level` | integer (option) | `7` | How much to frobnicate. |" in text
    assert "## Options of `lbench` itself" in text and "| `--verbose` | flag (option) | off | Say more. |" in text


# ------------------------------------------------------------------ command lines in the docs

_SHELL = ("", "sh", "bash", "console", "shell")
_INLINE = re.compile(r"(?:^|[\s(])`((?:\.venv/bin/)?lbench [^`\n]*)`")


def code_blocks(text: str) -> tuple[list[str], str]:
    """(shell code blocks, the prose outside any fence), fences read line by line."""
    blocks, prose, current, lang = [], [], None, ""
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            if current is None:
                current, lang = [], line.strip()[3:].strip().lower()
            else:
                if lang in _SHELL:
                    blocks.append("\n".join(current))
                current = None
            continue
        (prose if current is None else current).append(line)
    return blocks, "\n".join(prose)


def command_lines(text: str) -> list[str]:
    """`lbench ...` invocations in shell code blocks and inline code."""
    blocks, prose = code_blocks(text)
    lines: list[str] = []
    for block in blocks:
        lines += block.replace("\\\n", " ").splitlines()
    lines += _INLINE.findall(prose)
    out = []
    for line in lines:
        line = line.split(" #", 1)[0]
        for part in re.split(r"&&|;|\|\|", line):
            m = re.search(r"(?:^|[\s/])lbench (.*)$", part)
            if m and not part.strip().startswith(("pip", "python", "import")):
                out.append("lbench " + m.group(1).strip())
    return out


def test_command_lines_reads_fences_line_by_line():
    text = "```toml\n[models]\n```\n\nprose `lbench runs`\n\n```sh\nlbench model synth tiny --bits 4 \\\n  -o x\n```\n"
    assert command_lines(text) == ["lbench model synth tiny --bits 4    -o x", "lbench runs"]


def parse(line: str):
    """(command path, {option: [values]}) for one documented line; raises AssertionError if wrong."""
    line = line.replace("[", " ").replace("]", " ").replace("...", " ")
    try:
        tokens = shlex.split(line)[1:]
    except ValueError:
        tokens = line.split()[1:]
    command, path = _root(), ["lbench"]
    while tokens and hasattr(command, "list_commands") and not tokens[0].startswith("-"):
        sub = _sub(command, tokens[0])
        assert sub is not None, f"`{line}`: {' '.join(path)} has no command {tokens[0]!r}"
        command, path = sub, path + [tokens.pop(0)]
    options = {}
    for param in command.params:
        for opt in [*param.opts, *getattr(param, "secondary_opts", [])]:
            if opt.startswith("-"):
                options[opt] = param
    seen: dict[str, list[str]] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if token in ("-h", "--help") or not token.startswith("-") or re.fullmatch(r"-[\d.]+", token) or token == "-":
            continue
        name, _, inline = token.partition("=")
        if "/" in name and all(n.startswith("-") for n in name.split("/")):  # a `--x/--no-x` pair
            for n in name.split("/"):
                assert n in options, f"`{line}`: {' '.join(path)} has no option {n}"
            continue
        assert name in options, f"`{line}`: {' '.join(path)} has no option {name}"
        param = options[name]
        if getattr(param, "is_flag", False) or getattr(param, "count", False):
            continue
        value = inline if inline else (tokens[i] if i < len(tokens) else "")
        if not inline:
            i += 1
        seen.setdefault(param.name, []).append(value)
    return " ".join(path), seen


def documented_lines():
    for path in doc_files():
        for line in command_lines(path.read_text()):
            yield path, line


def test_docs_contain_command_lines():
    lines = [line for path, line in documented_lines() if path == README]
    assert len(lines) >= 10, lines


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_documented_command_lines_parse(path):
    for line in command_lines(path.read_text()):
        parse(line)


# which capability an engine needs to be named with --engine for each command
NEEDS = {"lbench idle": ("idle", "cross_check"), "lbench calibrate": ("idle",), "lbench swap": ("swap",),
         "lbench ab": ("idle",)}


def _engine_values(values: list[str]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _spec_engines(command: str, seen: dict[str, list[str]]) -> list[str]:
    """The engines a bundled spec named with --spec runs (a spec path or an option given beside it aside):
    `lbench idle --spec ollama-keep-alive` names Ollama without an --engine on the line."""
    from harness import resources
    from harness.spec import load_spec

    if command != "lbench idle" or seen.get("engine"):
        return []
    names = [v for v in seen.get("spec_file", []) if v in resources.bundled_idle_specs()]
    return [e for name in names for e in load_spec(resources.find_spec(name)).engines]


def engine_problems(entries) -> list[str]:
    bad = []
    for path, line in entries:
        command, seen = parse(line)
        for engine in _engine_values(seen.get("engine", [])) + _spec_engines(command, seen):
            if engine.isupper() or engine.startswith(("<", "$")):
                continue  # a placeholder
            kind = registry.get(engine)
            needs = NEEDS.get(command, ("idle",))
            if not any(kind.can(c) for c in needs):
                bad.append(f"{path}: `{line}`: {engine} cannot {' or '.join(needs)}")
    return bad


def test_engines_in_documented_commands_can_run_them():
    bad = engine_problems((path.relative_to(REPO), line) for path, line in documented_lines())
    assert not bad, "\n".join(bad)


def test_engine_option_help_names_only_capable_engines():
    """`lbench swap --engine` help must not offer an engine the registry refuses for swap."""
    root = _root()
    for name, needs in NEEDS.items():
        command = _sub(root, name.split()[1])
        if command is None:
            continue
        for param in command.params:
            if param.name != "engine" or not param.help:
                continue
            for engine in registry.names():
                if re.search(rf"(?<![\w-]){re.escape(engine)}(?![\w-])", param.help):
                    assert any(registry.get(engine).can(c) for c in needs), (name, engine, param.help)


def test_the_swap_engine_check_catches_openai():
    """The stale fact from issue 13: `swap --engine openai` was documented but is rejected."""
    stale = "```sh\nlbench swap --engine openai -n 20   # storms through any server\n```\n"
    problems = engine_problems(("README.md", line) for line in command_lines(stale))
    assert problems == ["README.md: `lbench swap --engine openai -n 20`: openai cannot swap"]
    assert engine_problems([("x.md", "lbench idle --engine llama-server --engine llama-idle")]) == []


def test_the_engine_check_reads_the_engines_of_a_bundled_spec():
    """A documented `lbench idle --spec NAME` is checked with the engines the spec runs (Ollama's grid)."""
    from harness import resources
    from harness.spec import load_spec

    assert load_spec(resources.find_spec("ollama-keep-alive")).engines == ["ollama"]
    assert _spec_engines(*parse("lbench idle --spec ollama-keep-alive")) == ["ollama"]
    assert engine_problems([("x.md", "lbench idle --spec ollama-keep-alive")]) == []
    assert engine_problems([("x.md", "lbench swap --engine ollama")]) == ["x.md: `lbench swap --engine ollama`: "
                                                                            "ollama cannot swap"]


def test_parse_rejects_unknown_options_and_commands():
    with pytest.raises(AssertionError, match="no option --bogus"):
        parse("lbench idle --bogus 3")
    with pytest.raises(AssertionError, match="no command"):
        parse("lbench engine frobnicate")
    assert parse("lbench ab -m tiny-q8 --b-arg --threads --b-arg 1")[1]["b_arg"] == ["--threads", "1"]


# ------------------------------------------------------------------ README shape and links

def test_readme_is_a_short_newcomer_path():
    assert len(README.read_bytes()) <= 10 * 1024, f"README.md is {len(README.read_bytes())} bytes (limit 10 KB)"
    text = README.read_text()
    for section in ("## The two commands", "## Example commands", "## Where results go", "## Reading a report"):
        assert section in text


def test_readme_first_command_sets_up_and_runs_the_default_job():
    text = README.read_text()
    assert "bash scripts/setup.sh && .venv/bin/lbench idle" in text


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(path):
    for target in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", path.read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (path.parent / target).exists(), f"{path.relative_to(REPO)} links to missing {target}"


def test_readme_links_every_reference_doc():
    text = README.read_text()
    for doc in sorted(DOCS.glob("*.md")):
        assert f"docs/{doc.name}" in text, f"README does not link docs/{doc.name}"


# ------------------------------------------------------------------ figures that went stale once

def _option(command_name: str, option: str):
    command = _root()
    for part in command_name.split()[1:]:
        command = _sub(command, part)
    return next(p for p in command.params if option in p.opts)


def calibrate_reps_default() -> int:
    param = _option("lbench calibrate", "--reps")
    if param.default is not None:
        return int(param.default)
    return int(re.search(r"default (\d+)", param.help).group(1))


def steady_after() -> int:
    import importlib

    for module in ("harness.analysis.calibration", "harness.cli.idle"):
        try:
            value = getattr(importlib.import_module(module), "STEADY_AFTER", None)
        except ImportError:
            continue
        if value is not None:
            return int(value)
    raise AssertionError("STEADY_AFTER not found; update tests/test_docs.py")


def _all_docs_text() -> str:
    return "\n".join(p.read_text() for p in doc_files())


def test_calibration_repetitions_match_the_code():
    reps = calibrate_reps_default()
    text = (DOCS / "calibration.md").read_text()
    stated = re.findall(r"(\d+) repetitions", text)
    assert stated, "docs/calibration.md should say how many repetitions calibrate runs"
    assert {int(n) for n in stated} == {reps}, (stated, reps)
    for path in doc_files():
        for para in path.read_text().split("\n\n"):
            if re.search(r"\bcalibrate\b", para):
                for n in re.findall(r"(\d+) repetitions", para):
                    assert int(n) == reps, f"{path.name}: calibrate runs {reps} repetitions, docs say {n}"


def test_settle_count_after_a_pause_matches_the_code():
    n = steady_after()
    text = (DOCS / "calibration.md").read_text()
    stated = re.findall(r"first (\d+) back-to-back requests after (?:any|a) pause", text)
    assert stated and {int(s) for s in stated} == {n}, (stated, n)
    stale = re.findall(r"about (\d+) requests after", _all_docs_text())
    assert not stale, f"docs give a settle count ({stale}) other than the code's rule ({n})"


_MINUTES = re.compile(r"\b\d+(?:\.\d+)?\s*(?:min\b|mins\b|minutes?\b)")
_BUILD_WORDS = re.compile(r"build|install|compil", re.I)


def build_time_mentions(files=None) -> list[str]:
    """Every place a build time in minutes is stated, outside docs/builds.md."""
    if files is None:
        files = [*doc_files(), *REPO.joinpath("harness").rglob("*.py"), *REPO.joinpath("tests").rglob("*.py"),
                 *REPO.joinpath("scripts").glob("*"), REPO / ".ci" / "run"]
    found = []
    for path in files:
        if path == DOCS / "builds.md" or path == Path(__file__).resolve() or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        for m in _MINUTES.finditer(text):
            context = text[max(0, m.start() - 150): m.end() + 60]
            if _BUILD_WORDS.search(context):
                found.append(f"{path.name}: ...{' '.join(context.split())}...")
    return found


def test_build_time_is_stated_once_in_docs_builds():
    found = build_time_mentions()
    assert not found, "the engine build time is stated outside docs/builds.md:\n" + "\n".join(found)
    assert _MINUTES.search((DOCS / "builds.md").read_text())


def test_build_time_scan_would_catch_a_stale_figure(tmp_path):
    stale = tmp_path / "llama_server.py"
    stale.write_text('hint="run `lbench engine install` (builds the pinned llama.cpp, ~12 min on 2 cores)"\n')
    other = tmp_path / "claim.toml"
    other.write_text('claim = "An idle runner is unloaded when its keep-alive expires (default 5 minutes)."\n')
    assert len(build_time_mentions([stale, other])) == 1


def test_readme_first_command_describes_the_default_sweep():
    """README's description of the first command's run follows the spec's defaults."""
    import dataclasses

    from harness import spec

    defaults = {f.name: (f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default)
                for f in dataclasses.fields(spec.IdleSpec)}
    m = re.search(r"\((\d+) pauses from (\d+) to (\d+) s, (\d+) shuffled\s+repetitions", README.read_text())
    assert m, "README should describe the default sweep: (N pauses from A to B s, R shuffled repetitions"
    pauses = defaults["pauses_s"]
    assert (int(m[1]), float(m[2]), float(m[3]), int(m[4])) == (len(pauses), min(pauses), max(pauses),
                                                                defaults["reps"])
    assert defaults["models"] == ["llama3.2-1b-q8"] and "Llama-3.2-1B shape, Q8_0" in README.read_text()


# ------------------------------------------------------------------ names the docs point at

_TOP = ("harness/", "tests/", "experiments/", "reports/", "scripts/", "docs/", ".ci/")


def named_paths(text: str) -> list[str]:
    """Repository paths named in inline code, e.g. `harness/engines/registry.py`."""
    out = []
    for token in re.findall(r"`([^`\s]+)`", text):
        token = token.rstrip(".,:;")
        if token.startswith(_TOP) and "<" not in token and "$" not in token:
            out.append(token.split("::")[0])
    return out


def test_paths_named_in_docs_exist():
    missing = []
    for path in doc_files():
        for name in named_paths(path.read_text()):
            if not (any(REPO.glob(name)) if "*" in name else (REPO / name).exists()):
                missing.append(f"{path.relative_to(REPO)}: {name}")
    assert not missing, "docs name files that do not exist:\n" + "\n".join(missing)


def test_named_paths_finds_paths_in_inline_code():
    assert named_paths("see `harness/engines/registry.py`, `results/<run id>/` and `lbench idle`") == [
        "harness/engines/registry.py"]


def all_option_names() -> set[str]:
    names = set()
    for _, command in reference.walk():
        for param in command.params:
            names.update(o for o in [*param.opts, *getattr(param, "secondary_opts", [])] if o.startswith("-"))
    return names


def test_options_in_doc_tables_exist():
    """A table row that starts with an option (docs/instrument.md's knob table, ...) names a real one."""
    known = all_option_names()
    bad = []
    for path in doc_files():
        if path.name == "cli.md":
            continue
        for row in re.findall(r"^\|\s*`(--[\w-]+)", path.read_text(), re.M):
            if row not in known:
                bad.append(f"{path.relative_to(REPO)}: {row}")
    assert not bad, "doc tables name options no command has:\n" + "\n".join(bad)


def test_architecture_names_every_package():
    text = (DOCS / "architecture.md").read_text()
    packages = sorted(p.parent.name for p in REPO.joinpath("harness").glob("*/__init__.py"))
    missing = [p for p in packages if f"harness/{p}/" not in text]
    assert not missing, f"docs/architecture.md does not describe harness/{missing}"
    assert "harness/engines/registry.py" in text and "harness/runkind.py" in text and "harness/kinds/" in text


def test_code_points_at_docs_that_exist():
    """Help texts and hints name docs/*.md files; reference material is no longer in README."""
    missing, readme_refs = [], []
    for path in REPO.joinpath("harness").rglob("*.py"):
        text = path.read_text()
        missing += [f"{path.relative_to(REPO)}: {d}" for d in re.findall(r"docs/[\w/.-]+\.md", text)
                    if not (REPO / d).exists()]
        readme_refs += [f"{path.relative_to(REPO)}" for _ in re.findall(r"see README", text)]
    assert not missing, missing
    assert not readme_refs, f"'see README' in {readme_refs}: point at the docs/ page instead"


def test_calibration_block_matches_the_code():
    import importlib

    for name in ("harness.analysis.calibration", "harness.cli.idle"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "CALIBRATION_PAUSES"):
            break
    pauses = module.CALIBRATION_PAUSES
    back_to_back = sum(1 for p in pauses if p == 0)
    short = sorted(p for p in pauses if p > 0)
    text = " ".join((DOCS / "calibration.md").read_text().split())
    stated = f"a block of {back_to_back} back-to-back requests and {len(short)} short pauses of {short[0]:g}-{short[-1]:g} s"
    assert stated in text, f"docs/calibration.md should say: {stated}"
