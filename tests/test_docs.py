"""The README stays a front door and the docs describe the software as it is, not its history."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))

# A project-internal reference: "issue 20", "(issue 20, item 5a)", "item 5c", "stop 3", or a bare
# "#12". External citations (`mem0ai/mem0#3789`, `memory-benchmarks#29`) are preceded by a name.
ISSUE_REFERENCE = re.compile(
    r"\bissues? \d+"
    r"|\bitems? \d+[a-z]\b"
    r"|\bstops? \d+\b"
    r"|(?<![\w./-])#\d+\b",
    re.IGNORECASE,
)


def issue_references(text: str) -> list[str]:
    """The lines of ``text`` that cite the project's own issues."""
    return [line for line in text.splitlines() if ISSUE_REFERENCE.search(line)]


def test_the_readme_is_at_most_150_lines():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 150


def test_the_readme_links_every_docs_page():
    links = set(re.findall(r"\]\((docs/[\w.-]+\.md)", README.read_text(encoding="utf-8")))
    assert DOCS, "no docs pages found"
    missing = [f"docs/{page.name}" for page in DOCS if f"docs/{page.name}" not in links]
    assert not missing, missing


def test_the_readme_links_only_existing_docs_pages():
    links = set(re.findall(r"\]\((docs/[\w.-]+\.md)", README.read_text(encoding="utf-8")))
    assert all((ROOT / link).is_file() for link in links), links


def test_the_docs_index_comes_before_the_paper_presets():
    text = README.read_text(encoding="utf-8")
    assert text.index("docs/architecture.md") < text.index("configs/paper")


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: p.name)
def test_no_page_cites_the_projects_own_issues(page):
    assert issue_references(page.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "line",
    [
        "measured after issue 19",
        "## A whole run of the LongMemEval-S shape (issue 20, item 5a)",
        "the fixed reply (item 5c)",
        "see stop 3 of the review",
        "fixed in #42 ",
        "Issues 12 and 13",
    ],
)
def test_an_issue_reference_is_caught(line):
    assert issue_references(line) == [line]


@pytest.mark.parametrize(
    "line",
    [
        "as reported in mem0ai/mem0#3789",
        "the maintainers' answer (memory-benchmarks#29)",
        "LexEval-QA item 56 scores 0.0",
        "item 2 is not sampled",
        "the 28 datasets",
    ],
)
def test_an_external_citation_or_data_item_is_allowed(line):
    assert issue_references(line) == []
