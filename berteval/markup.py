"""Untrusted text on a page: what a visitor types, URL parameters, record fields and dataset texts.

Gradio's Markdown renders HTML inside Markdown (it strips scripts and `on*` handlers, not images,
links or forms), and Plotly renders a subset of HTML in labels (`<a href>` included), so a model
named `x<img src=http://other-host/pixel>` or a link `?q=<form action=...>` would draw on the page
whatever the text asks for. Two rules, applied where text meets a renderer:

- `neutral(value)`: a value from outside (a record field, a dataset text) with `<` and `>` replaced
  by the look-alike `‹` `›`: no tag can form from it, in Markdown, Plotly or a table, and a
  normal name (which never holds either) is unchanged.
- `safe_markdown(text)`: the last step before a Markdown component: outside code spans `<`, `>`
  become entities and `[`, `]` are backslash-escaped (no raw HTML, no links or images), and
  `http://`, `https://`, `www.` lose their autolink; inside code spans (shown literally anyway)
  `<` `>` become `‹` `›`, so even a span the renderer splits differently can hold no tag. The
  page's own Markdown uses no HTML and no links, so this costs it nothing.
- `redact_paths(text)`: a page's message names no absolute server path.
- `csv_cell(value)`: a CSV cell that a spreadsheet would run as a formula (starts with `=`, `+`,
  `-`, `@`, tab or carriage return: OWASP's rule) gets a leading `'`.
Pure and torch-free.
"""

from __future__ import annotations

import re

_CODE = re.compile(r"(`+)(.+?)\1", re.S)
_AUTOLINK = re.compile(r"(?i)\b(https?):(//)|\b(www)\.")
_FORMULA = ("=", "+", "-", "@", "\t", "\r")
_ABS_PATH = re.compile(r"(?<![\w.:/])(/(?:[\w.+@-]+/)+[\w.+@-]*)")
REPO = __import__("pathlib").Path(__file__).resolve().parent.parent


def neutral(value):
    """`value` with `<`/`>` replaced by look-alikes (non-strings returned as they are)."""
    if not isinstance(value, str):
        return value
    return value.replace("<", "‹").replace(">", "›")


def _outside(text: str) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace("[", "\\[").replace("]", "\\]")
    return _AUTOLINK.sub(lambda m: f"{m.group(1)}\\:{m.group(2)}" if m.group(1) else f"{m.group(3)}\\.", text)


def safe_markdown(text: str | None) -> str:
    """Markdown safe to render from text that may hold untrusted parts (see the module docstring)."""
    if not text:
        return text or ""
    out, last = [], 0
    for m in _CODE.finditer(text):
        out.append(_outside(text[last : m.start()]))
        out.append(m.group(1) + neutral(m.group(2)) + m.group(1))
        last = m.end()
    out.append(_outside(text[last:]))
    return "".join(out)


def code(value) -> str:
    """A value to put inside a Markdown code span: no backticks (they would end it), no tags."""
    return neutral(str(value)).replace("`", "ʼ").replace("\n", " ")


def code_span(value) -> str:
    """`value` as one Markdown code span, shown exactly (backticks included): fenced by one more backtick than its
    longest run of them, padded with a space where it starts or ends with one (CommonMark strips one space each
    side); no tags (`neutral`), on one line."""
    text = neutral(str(value)).replace("\n", " ")
    fence = "`" * (max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def redact_paths(text: str | None) -> str:
    """`text` with no absolute server path: one inside the repository becomes relative to it, any other becomes
    `…/<last part>` (a page's messages name the file a visitor can act on, never the server's layout)."""
    if not text:
        return text or ""
    root = str(REPO) + "/"

    def one(m: re.Match) -> str:
        path = m.group(1)
        if path.startswith(root):
            return path[len(root):]
        tail = path.rstrip("/").rsplit("/", 1)[-1]
        return "…/" + tail if tail else "…"

    return _ABS_PATH.sub(one, text.replace(root, ""))


def csv_cell(value):
    """A CSV cell a spreadsheet will not evaluate: text starting with a formula character gets a leading '."""
    if isinstance(value, str) and value.startswith(_FORMULA):
        return "'" + value
    return value
