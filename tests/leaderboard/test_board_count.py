"""The leaderboard's count line describes the rows shown. Before, a search that matched nothing read
"47 records match; 0 rows": the count was of records the filters match, the rows were after the search."""

from __future__ import annotations

import re
import sys

import pytest

from conftest import REPO

pytest.importorskip("gradio", reason="gradio is not installed: pip install -r requirements.txt")
sys.path.insert(0, str(REPO))
import app  # noqa: E402


def _count(search: str) -> tuple[str, int]:
    summary, table, *_ = app.board("all", "sst2", "all", "all", search)
    return summary, len(table)


def test_without_a_search_the_line_counts_the_rows_and_their_records():
    summary, rows = _count("")
    assert rows > 0 and summary.startswith(f"{rows} rows shown, one per setup: ")


def test_a_search_that_matches_nothing_says_no_rows_are_shown_and_why():
    summary, rows = _count("no-such-word-anywhere")
    assert rows == 0 and summary.startswith("No rows shown: nothing matches the search “no-such-word-anywhere”")
    assert "the figures show all of them" in summary  # the search narrows the table, not the figures


def test_a_search_that_matches_some_counts_what_it_kept():
    summary, rows = _count("mean")
    _, all_rows = _count("")
    kept = int(re.search(r"\((\d+) records\)", summary).group(1))
    matched = int(re.search(r"; (\d+) records match the filters", summary).group(1))
    assert 0 < rows < all_rows and summary.startswith(f"{rows} rows shown, those matching the search “mean”")
    assert 0 < kept < matched
