"""Span QA's two logits per token, drawn: the app's "why two logits" chart (Answer tab), live per question.

An extractive QA head scores every token of the window twice, once as the answer's start
and once as its end; the answer is the best-scoring (start <= end) pair inside the
context. Plotting both curves over the tokens, with the question part shaded and the
chosen start and end marked, shows it at a glance. Pure: arrays in, `go.Figure` out, and
like the leaderboard's figures it fails soft. It lives with them because every Plotly figure does:
`berteval` never imports plotly, and app.py only builds the page and wires it.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .base import fails_soft, message
from .style import WHITE

START_COLOUR, END_COLOUR = "#1f77b4", "#d62728"
TITLE = "Start and end logits per token"
MAX_TICK_LABELS = 60  # beyond this many tokens the axis shows positions; hover still names each token


@fails_soft(TITLE)
def start_end_logits(tokens: list[str], start_logits, end_logits, start_token: int | None = None,
                     end_token: int | None = None, sep_token: str | None = "[SEP]", title: str = TITLE) -> go.Figure:
    """tokens: the window's tokens; start_logits, end_logits: (T,) each; the answer's token span, if any.
    sep_token None: the input is one text (Inside BERT), nothing is shaded as the question."""
    s = np.asarray(start_logits, dtype=float)  # (T,)
    e = np.asarray(end_logits, dtype=float)  # (T,)
    n = min(len(tokens), len(s), len(e))
    if n == 0:
        return message(TITLE, "no tokens to show")
    tokens, s, e = list(tokens[:n]), s[:n], e[:n]
    x = list(range(n))
    # The figure is drawn on every answer, so it is written as one spec and validated once: built up
    # through add_vrect / add_trace / update_layout (and the plotly_white template) it took 20 ms of a
    # request, the spec takes 2 ms.
    shapes, notes = [], []
    if sep_token is not None and sep_token in tokens:  # [CLS] question [SEP] context [SEP]: no answer in the question
        q_end = tokens.index(sep_token)
        shapes.append(dict(type="rect", xref="x", yref="paper", x0=-0.5, x1=q_end + 0.5, y0=0, y1=1, layer="below",
                           fillcolor="#999", opacity=0.12, line=dict(width=0)))
        notes.append(dict(text="question", xref="x", yref="paper", x=-0.5, y=1, xanchor="left", yanchor="top",
                          showarrow=False))
    hover = "%{customdata}<br>token %{x}<br>%{fullData.name} logit %{y:.2f}<extra></extra>"
    data = [dict(type="scatter", x=x, y=values.tolist(), mode="lines+markers", name=f"{name} logit",
                 customdata=tokens, hovertemplate=hover, line=dict(color=colour, width=1.5), marker=dict(size=4))
            for name, values, colour in (("start", s, START_COLOUR), ("end", e, END_COLOUR))]
    one_token = start_token is not None and start_token == end_token  # one label, or two would overprint
    marks = [(start_token, s, START_COLOUR, "answer start and end" if one_token else "answer start", "top left"),
             (end_token, e, END_COLOUR, None if one_token else "answer end", "top right")]
    for idx, values, colour, label, position in marks:
        if idx is not None and 0 <= idx < n:
            data.append(dict(type="scatter", x=[idx], y=[float(values[idx])], mode="markers+text",
                             name=label or "answer end", text=[f"{label}: {tokens[idx]}" if label else ""],
                             textposition=position, hoverinfo="skip", showlegend=False, cliponaxis=False,
                             marker=dict(size=13, color=colour, symbol="star", line=dict(width=1, color="#fff"))))
    xaxis = dict(WHITE["xaxis"], title=dict(text="token position in the window"), zeroline=False)
    if n <= MAX_TICK_LABELS:
        xaxis.update(tickmode="array", tickvals=x, ticktext=tokens, tickangle=-60, title=None)
    # Headroom above the highest logit: the answer's star sits there with its label written above it, which a
    # range ending at the highest point clipped ("answer start and end: ..." cut off at the top).
    low, high = float(min(s.min(), e.min())), float(max(s.max(), e.max()))
    pad = max(high - low, 1.0)
    yaxis = dict(WHITE["yaxis"], title=dict(text="logit"), range=[low - 0.08 * pad, high + 0.22 * pad])
    layout = dict(WHITE, title=dict(WHITE["title"], text=title), height=400, xaxis=xaxis,
                  yaxis=yaxis, hovermode="closest", shapes=shapes,
                  annotations=notes, margin=dict(t=90, b=60, l=60, r=20),
                  legend=dict(orientation="h", y=1.02, yanchor="bottom", x=1, xanchor="right"))
    return go.Figure(dict(data=data, layout=layout))
