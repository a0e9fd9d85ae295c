"""The documentation stays true by construction (issue 40): every option of every verb and every registry entry
(task, pooling, regime) is named in docs/cli.md, every relative link and #anchor in README.md and docs/ resolves
(GitHub's heading slugs), every findings page is in the README's list, and `--help` names every task."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from berteval import cli
from conftest import REPO

CLI_DOC = REPO / "docs" / "cli.md"
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
FENCE = re.compile(r"^\s*(```|~~~)")


def _verbs() -> dict[str, argparse.ArgumentParser]:
    ap = cli._parser()
    sub = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _prose(path: Path):
    """(line number, line) outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            yield number, line


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, every character but letters, digits, spaces, hyphens and
    underscores dropped (backticks, dots, slashes, colons...), spaces to hyphens."""
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a page offers: its headings' slugs (a repeated one numbered -1, -2, ... as GitHub does)
    and explicit <a name|id="...">."""
    out: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in _prose(path):
        if heading := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line):
            base = slug(heading.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            out.add(base if count == 0 else f"{base}-{count}")
        out.update(re.findall(r'<a\s+(?:name|id)="([^"]+)"', line))
    return out


def links(path: Path):
    """(line number, target) of each Markdown link outside code (fenced blocks and `inline code`)."""
    for number, line in _prose(path):
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", re.sub(r"`[^`]*`", "", line)):
            yield number, target


def test_slugs_are_githubs():
    assert slug("Pooling registry (`berteval/pooling/`)") == "pooling-registry-bertevalpooling"
    assert slug("The examples behind a test: `python -m berteval disagree`") == \
        "the-examples-behind-a-test-python--m-berteval-disagree"
    assert slug("Install it as a package") == "install-it-as-a-package"


def test_every_option_of_every_verb_is_in_the_cli_page():
    doc = CLI_DOC.read_text(encoding="utf-8")
    missing = [f"{verb} {option}" for verb, parser in _verbs().items() for action in parser._actions
               if action.help != argparse.SUPPRESS for option in action.option_strings
               if option.startswith("--") and option != "--help"
               and not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", doc)]
    assert not missing, f"options docs/cli.md does not name: {', '.join(missing)}"


def test_every_task_pooling_and_regime_is_in_the_cli_page():
    from berteval.pooling import POOLINGS
    from berteval.regimes import REGIMES
    from berteval.tasks import TASKS

    doc = CLI_DOC.read_text(encoding="utf-8")
    for kind, names in (("task", TASKS), ("pooling", POOLINGS), ("regime", REGIMES)):
        missing = [name for name in names if f"`{name}`" not in doc]
        assert not missing, f"{kind}s docs/cli.md does not name: {', '.join(missing)}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_and_anchor_resolves(page):
    broken = []
    for number, target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:: not this repository's
            continue
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            broken.append(f"line {number}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"line {number}: {target} (no such heading)")
    assert not broken, f"{page.relative_to(REPO)}: " + "; ".join(broken)


def test_the_readme_and_the_docs_index_list_every_findings_page():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    index = (REPO / "docs" / "README.md").read_text(encoding="utf-8")
    for page in sorted((REPO / "docs" / "findings").glob("*.md")):
        assert f"(docs/findings/{page.name})" in readme, f"README's list lacks findings/{page.name}"
        assert f"(findings/{page.name})" in index, f"docs/README.md lacks findings/{page.name}"


def test_help_names_every_task_and_its_examples_hold_no_stray_spaces(capsys):
    from berteval.tasks import TASKS

    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    description = " ".join(text.split())
    assert all(t.display_name in description for t in TASKS.values())
    examples = [line.strip() for line in cli.EXAMPLES.splitlines()[1:] if line.strip()]
    assert examples and all("  " not in line.split("  #")[0] for line in examples), \
        [line for line in examples if "  " in line.split("  #")[0]]
