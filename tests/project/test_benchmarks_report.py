"""The docs' benchmark tables are what the committed results give (benchmarks/report.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "benchmarks" / "report.py"
DOCS = ("docs/benchmarks.md", "docs/integrity.md")


def run_report(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPORT), *arguments],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.fixture
def checkout_copy(tmp_path: Path) -> Path:
    """The docs and the committed results, copied where a test may change them."""
    for doc in DOCS:
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / doc, tmp_path / doc)
    shutil.copytree(
        ROOT / "benchmarks" / "results",
        tmp_path / "benchmarks" / "results",
        ignore=shutil.ignore_patterns("quick", "*.png", "*.md"),
    )
    return tmp_path


def test_docs_tables_match_the_committed_results() -> None:
    done = run_report("--check")
    assert done.returncode == 0, done.stdout + done.stderr


def test_check_fails_and_names_the_doc_when_a_figure_drifts(checkout_copy: Path) -> None:
    doc = checkout_copy / "docs" / "benchmarks.md"
    text = doc.read_text()
    start = text.index("<!-- report.py: run -->")
    row = text.index("| W1 |", start)
    drifted = text[:row] + "| W1 | a figure no results file holds |" + text[row + len("| W1 |") :]
    doc.write_text(drifted)

    done = run_report("--check", "--root", str(checkout_copy))

    assert done.returncode == 1
    assert "docs/benchmarks.md" in done.stderr
    assert "-| W1 | a figure no results file holds |" in done.stdout
    assert doc.read_text() == drifted  # --check writes nothing


def test_rewrite_restores_the_tables_and_leaves_the_prose(checkout_copy: Path) -> None:
    doc = checkout_copy / "docs" / "integrity.md"
    original = doc.read_text()
    opening = "<!-- report.py: integrity -->\n"
    start = original.index(opening) + len(opening)
    end = original.index("<!-- /report.py: integrity -->")
    doc.write_text(original[:start] + "stale table\n" + original[end:])

    assert run_report("--root", str(checkout_copy)).returncode == 0

    assert doc.read_text() == original
    assert run_report("--check", "--root", str(checkout_copy)).returncode == 0


def test_check_fails_when_a_section_has_no_results_file(checkout_copy: Path) -> None:
    (checkout_copy / "benchmarks" / "results" / "peers.json").unlink()

    done = run_report("--check", "--root", str(checkout_copy))

    assert done.returncode != 0
    assert "peers.json" in done.stderr
