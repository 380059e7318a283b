from pathlib import Path

from harness.schema import schema_markdown

REPO = Path(__file__).resolve().parents[1]


def test_schema_doc_documents_every_sample_column():
    # the column tables moved from README to docs/schema.md (issue 13)
    assert schema_markdown() in (REPO / "docs" / "schema.md").read_text()


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    assert "```sh\nbash scripts/test.sh\n```" in readme
    assert "exec bash scripts/test.sh" in ci
