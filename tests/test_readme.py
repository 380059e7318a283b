from pathlib import Path

from harness.schema import schema_markdown

REPO = Path(__file__).resolve().parents[1]


def test_readme_documents_every_sample_column():
    assert schema_markdown() in (REPO / "README.md").read_text()


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    assert "scripts/test.sh" in readme and "scripts/test.sh" in ci
