from pathlib import Path

from harness.schema import TABLES

REPO = Path(__file__).resolve().parents[1]


def test_schema_doc_documents_every_sample_column():
    # the column tables moved from README to docs/schema.md (issue 13)
    assert TABLES["samples"].markdown() in (REPO / "docs" / "schema.md").read_text()


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    assert "```sh\nbash scripts/test.sh\n```" in readme
    assert "exec bash scripts/test.sh" in ci


def test_readme_saves_a_baseline_before_using_it():
    readme = (REPO / "README.md").read_text()
    assert "baseline save" in readme
    assert readme.index("baseline save") < readme.index("baseline:"), "README uses baseline:NAME before saving one"


def test_run_ids_in_the_docs_have_the_format_lbench_writes():
    """An example id like 20261130T0101Z-idle-aaaa (no seconds, no hex) is one lbench never writes."""
    import re

    from harness.cli.reference import render
    from harness.kinds import KINDS
    from harness.store import new_run_id

    # "alive": the bench ids scripts/alive_servers.py writes (the same shape; not a kind of run)
    written = re.compile(r"\d{8}T\d{6}Z-(%s)-[0-9a-f]{4}" % "|".join([*(k.name for k in KINDS), "gate-bench", "wake-bench",
                                                                      "alive"]))
    assert written.fullmatch(new_run_id("idle"))
    texts = {"README.md": (REPO / "README.md").read_text(), "--help (docs/cli.md)": render()}
    texts.update({f"docs/{p.name}": p.read_text() for p in (REPO / "docs").glob("*.md")})
    bad = [f"{where}: {m}" for where, text in texts.items()
           for m in re.findall(r"\b\d{8}T\w*Z-[\w-]+", text) if not written.fullmatch(m)]
    assert not bad, "\n".join(bad)


def test_the_mac_grid_run_time_is_computed_from_the_grid():
    """README and docs/mac.md state the keep-alive grid's pause time; it must follow from the
    command they show (sum of pauses x reps x settings), and the grid must pass 180 s."""
    import re

    from harness.spec import parse_pauses

    for doc in (REPO / "README.md", REPO / "docs" / "mac.md"):
        text = doc.read_text()
        (line,) = [x for x in re.findall(r"^lbench idle .*$", text, flags=re.M)
                   if "--keep-alive" in x and "--reps" in x and "--pauses" in x]
        cmd = re.search(r"--pauses (\S+)", line).group(1)
        reps = int(re.search(r"--reps (\d+)", line).group(1))
        settings = len(re.search(r"--keep-alive (\S+)", line).group(1).split(","))
        pauses = parse_pauses(cmd)
        assert min(pauses) == 0 and max(pauses) > 180, doc
        per_rep = sum(pauses)
        flat = " ".join(text.split())
        assert f"{per_rep:.1f} s per repetition" in flat, doc
        assert f"{per_rep * reps * settings / 60:.1f} min" in flat, doc
        assert "untested" in flat.lower(), doc


def test_top_level_help_gives_the_readme_quick_start():
    import re

    from conftest import run_cli

    readme = (REPO / "README.md").read_text()
    quick = re.search(r"## The two commands.*?```sh\n(.+?)\n```", readme, flags=re.S).group(1)
    shown = " ".join(run_cli("--help").stdout.split())
    assert quick in shown, (quick, shown[:400])
