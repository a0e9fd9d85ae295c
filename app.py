"""berteval's Gradio page: try BERT's three classic heads by hand, look inside, browse the leaderboard.

A thin shell. `build_demo()` builds the page and wires each control to a `berteval.serve`
or `leaderboard` call (the same code the CLI and the report run); `python app.py` serves
it. Everything runs offline on the embedded default model and the committed heads and
records; a hub id works where the hub is reachable. Any refusal or failure is shown in
the page as a message box, never as a traceback.

    python app.py [--host 127.0.0.1] [--port 7860]   # or GRADIO_SERVER_NAME / GRADIO_SERVER_PORT
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import logging
import os
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # offline: no telemetry or version calls

import gradio as gr  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

import leaderboard  # noqa: E402
from berteval import markup, precision, serve  # noqa: E402
from berteval.errors import BertevalError  # noqa: E402
from berteval.qa import DEFAULTS as QA  # noqa: E402
from leaderboard.figures import qa_logits  # noqa: E402

log = logging.getLogger("berteval.app")

HEADS = ("cls", "pooler", "mean")  # the three vectors a sentence classifier can read
# One request per core: each runs torch on one thread, so two requests use both cores of
# this machine instead of fighting over them (intra-op threads on a tiny input mostly spin).
CONCURRENCY = int(os.environ.get("BERTEVAL_APP_CONCURRENCY", "2"))
TORCH_THREADS = int(os.environ.get("BERTEVAL_APP_THREADS", "1"))
# Classify and Answer run on the fp32 weights, or on a bf16 copy where the host's speed matters more than the
# last digit: bf16 weights made the QA pass 2.6x faster on an AMX Xeon and 1.6x here, and changed 3 of 400 SQuAD
# answers and up to 7 of 872 SST-2 verdicts (README, Performance). fp32 answers are the records' answers.
SERVE_DTYPE = os.environ.get("BERTEVAL_APP_DTYPE", "fp32")
if SERVE_DTYPE not in precision.DTYPES:
    raise SystemExit(f"BERTEVAL_APP_DTYPE={SERVE_DTYPE!r}: use fp32 (the default) or bf16")
QUEUE_SIZE = 64
N_BEST_SHOWN = 10
# What the page promises, stated on it (the numbers are the ones enforced: serve.LIMITS, the queue below).
QA_LIMITS = (f"Contexts up to {serve.LIMITS['context']:,} characters; one longer than a {QA.max_length}-token window "
             f"is read in overlapping windows ({QA.doc_stride} tokens shared) and the best span of any window wins.")
SERVING = (f"Served by one queue: {CONCURRENCY} requests at a time per action, up to {QUEUE_SIZE} waiting; "
           f"Classify and Answer on {'a bf16 copy of the' if SERVE_DTYPE == 'bf16' else 'the fp32'} weights. Input "
           f"limits: sentence {serve.LIMITS['sentence']:,} characters, question {serve.LIMITS['question']:,}, "
           f"context {serve.LIMITS['context']:,}; longer input is refused with a message.")
NBEST_COLUMNS = ["rank", "answer", "probability", "start + end logit", "characters", "window"]
EMPTY_NBEST = pd.DataFrame(columns=NBEST_COLUMNS)
# The page shows the columns a reader compares, numbers rounded; the CSV download keeps every column.
TABLE_SHOWN = ["task", "regime", "pooling", "layer", "main_metric", "mean ± std", "band", "ci95_low", "ci95_high", "n_seeds",
               "n_train", "n_eval", "model", "reproduce", "run_ids"]
EMPTY_TABLE = pd.DataFrame(columns=TABLE_SHOWN)
EMPTY_REFS = pd.DataFrame(columns=["published model", "task", "regime", "head reads", "metric", "published value",
                                   "source", "not the same as berteval's setting"])
CSV_DIR = Path(tempfile.gettempdir()) / "berteval-app"

# System fonts: Gradio's bundled Source Sans Pro SemiBold lacks most capitals, so bold text mixed two fonts
# ("BERT" drawn with a small B); one system stack renders every weight from one family, offline too.
THEME = gr.themes.Default(font=("ui-sans-serif", "system-ui", "sans-serif"))
CSS = """
.berteval-status { border: 1px solid #e5a50a; background: #fff8e1; border-radius: 6px; padding: 8px 12px; }
.berteval-status p { margin: 0; color: #5c4400; }
.berteval-note p { color: #555; font-size: 0.92em; }
/* The answer inside its context reads as running text: Gradio lays each span out as its own flex item
   (the answer jumps to a line of its own) and breaks words anywhere ("na|me"). */
#qa-highlight .textfield { display: block; word-break: normal; overflow-wrap: anywhere; }
#qa-highlight .token-container, #qa-highlight .token { display: inline; }
"""

INTRO = """# berteval: BERT's heads, tried by hand
Sentence classification reads **one vector** per input (the `[CLS]` state, `pooler_output` or a mean over
tokens); extractive QA reads **every token**, twice (a start and an end logit); next-sentence prediction reads
the pooler. Try each below, look inside the encoder, and compare the measured heads on the leaderboard."""

EXAMPLES = {
    "classify": [
        ["A gorgeous, witty, seductive movie.", "mean"],
        ["The plot is a mess and the acting is even worse.", "cls"],
        ["It's not a bad film, just a forgettable one.", "pooler"],
    ],
    "qa": [
        ["In what country is Normandy located?",
         "The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, a region "
         "in France. They were descended from Norse raiders and pirates from Denmark, Iceland and Norway who, "
         "under their leader Rollo, agreed to swear fealty to King Charles III of West Francia."],
        ["What does the pooler apply to the first token's state?",
         "BERT's pooler takes the final hidden state of the [CLS] token, multiplies it by a learned matrix, adds "
         "a bias and applies a tanh. It was trained by next-sentence prediction during pre-training."],
    ],
    "nsp": [
        ["The Normans gave their name to Normandy, a region in France.",
         "They were descended from Norse raiders and pirates from Denmark, Iceland and Norway."],
        ["The Normans gave their name to Normandy, a region in France.",
         "The quarterback threw for three touchdowns in the second half."],
    ],
    "inside": [["The cat sat on the mat."], ["BERT reads every token, but a classifier reads one vector."]],
}


def _status(message: str = ""):
    """The tab's message box: shown with the message, hidden when there is none. The message may echo what a
    visitor typed: rendered safe (no HTML, no links) and with no server path in it."""
    return gr.update(value=markup.safe_markdown(markup.redact_paths(message)), visible=bool(message))


def _shown(*empty, md: tuple[int, ...] = ()):
    """Run a handler; on failure show each output's `empty` value and the reason in the message box (the last
    output). Outputs at the positions `md` are Markdown holding untrusted text: rendered through
    `markup.safe_markdown`. An unexpected error shows a fixed sentence (its text and traceback go to the log)."""
    def wrap(fn):
        @functools.wraps(fn)
        def run(*args):
            try:
                out = list(fn(*args))
                for i in md:
                    out[i] = markup.safe_markdown(markup.redact_paths(out[i]))
                return (*out, _status())
            except BertevalError as exc:
                message = str(exc)
            except Exception:  # noqa: BLE001: a visitor sees a message, the log keeps the traceback
                log.exception("handler %s failed", fn.__name__)
                message = "Something went wrong on the server while answering; it was logged. Try again, or " \
                          "another input."
            return (*empty, _status(f"⚠️ {message}"))
        return run
    return wrap


def _cut(reading) -> str:
    """A line above the result when the model read only part of the input (empty when it read all of it)."""
    note = reading.note() if reading is not None else ""
    return f"✂️ **Cut to fit: {note}.**\n\n" if note else ""


# --- Classify -----------------------------------------------------------------------------------------

def _head_line(head: serve.SentimentHead) -> str:
    return (f"dev accuracy {head.dev_accuracy:.4f} (seed {head.seed}; mean over {head.n_seeds} seeds "
            f"{head.mean_dev_accuracy:.4f}), record `{head.run_id}`")


@_shown(None, "", "", md=(1, 2))
def classify(model_text: str, sentence: str, pooling: str):
    name = serve.model_name(model_text)
    text = serve.check_text(sentence, "sentence")
    clf, probs, reading = serve.classify(name, text, HEADS, SERVE_DTYPE)
    heads = {p: clf.heads[p] for p in probs}
    if pooling not in heads:
        raise BertevalError(f"no committed SST-2 head reads `{pooling}` for {clf.model.model_id}; "
                            f"available: {', '.join(heads) or 'none'}.")
    p = probs[pooling]
    about = _cut(reading) + (f"**Head:** logistic-regression probe on `{pooling}` (last layer) of "
                             f"{clf.model.model_id}, trained on {heads[pooling].n_train:,} SST-2 sentences; "
                             f"{_head_line(heads[pooling])}.")
    if pooling == "pooler":
        about += f"\n\n**This model's pooler** is {clf.model.heads.pooler_provenance}."
    rows = "\n".join(f"| `{h}` | {probs[h]:.3f} | {'positive' if probs[h] >= 0.5 else 'negative'} | "
                     f"{heads[h].dev_accuracy:.4f} |" for h in heads)
    compare = ("**The same sentence under every head** (one forward pass feeds all of them):\n\n"
               "| head reads | P(positive) | verdict | its dev accuracy |\n|---|---|---|---|\n" + rows)
    return {"positive": p, "negative": 1.0 - p}, about, compare


# --- Answer -------------------------------------------------------------------------------------------

@_shown(None, EMPTY_NBEST, None, "", md=(3,))
def answer(model_text: str, question: str, context: str):
    name = serve.model_name(model_text)
    q = serve.check_text(question, "question")
    ctx = serve.check_text(context, "context")
    qa_model, ans = serve.answer(name, q, ctx, SERVE_DTYPE)
    if not ans.nbest:
        raise BertevalError("No answer span was found in the context (every candidate fell outside it).")
    best = ans.nbest[0]
    highlighted = {"text": ctx, "entities": [{"entity": "answer", "start": best.start_char, "end": best.end_char}]}
    nbest = pd.DataFrame([[i + 1, c.text, round(c.probability, 4), round(c.score, 2), f"{c.start_char}–{c.end_char}",
                           c.window + 1] for i, c in enumerate(ans.nbest[:N_BEST_SHOWN])], columns=NBEST_COLUMNS)
    fig = qa_logits.start_end_logits(ans.tokens, ans.start_logits, ans.end_logits, best.start_token, best.end_token,
                                  sep_token=getattr(qa_model.tokenizer, "sep_token", None) or "[SEP]")
    windows = ("one window" if ans.n_windows == 1 else
               f"{ans.n_windows} overlapping windows (doc stride); the chart shows window {best.window + 1}, "
               f"where the best answer is")
    about = (f"**Answer:** “{best.text}” (probability {best.probability:.2f} among the n-best, one entry per "
             f"answer text). The context was read in {windows}.\n\n**Head:** {qa_model.source}")
    return highlighted, nbest, fig, about


# --- Next sentence ------------------------------------------------------------------------------------

@_shown(None, "", md=(1,))
def next_sentence(model_text: str, a: str, b: str):
    name = serve.model_name(model_text)
    first = serve.check_text(a, "sentence")
    second = serve.check_text(b, "sentence")
    head, pred = serve.next_sentence(name, first, second)
    about = _cut(pred.reading) + f"**P(IsNext) = {pred.p_is_next:.3f}**, answered by the {pred.source}."
    if head.weight is None:
        about += (f" It reads `pooler_output`, and {head.model.model_id}'s pooler is "
                  f"{head.model.heads.pooler_provenance}.")
    else:
        about += (f"\n\n{head.model.model_id} has no pretrained next-sentence head (transformers would attach a "
                  f"random one), so a probe trained on NSP pairs answers instead: a logistic regression on "
                  f"`{head.pooling}`, dev accuracy {head.dev_accuracy:.4f} (mean over seeds), record `{head.run_id}`.")
    return {"IsNext": pred.p_is_next, "NotNext": 1.0 - pred.p_is_next}, about


# --- Inside BERT --------------------------------------------------------------------------------------

def _inside_markdown(r) -> str:
    t, h = r.last_hidden_state_shape[1], r.last_hidden_state_shape[-1]
    lines = [_cut(r.reading) + f"**{r.model_id}**, {t} tokens: `{' '.join(r.tokens)}`", "",
             "| output | shape | what it is |", "|---|---|---|",
             f"| `last_hidden_state` | `{r.last_hidden_state_shape}` | one {h}-d vector per token: what span QA "
             f"reads (two logits each) |"]
    if r.pooler_output_shape is not None:
        lines.append(f"| `pooler_output` | `{r.pooler_output_shape}` | one vector per input: tanh(W·h_[CLS] + b) |")
    else:
        lines.append("| `pooler_output` | none | this architecture has no pooler |")
    lines += ["", "**Pooler check.** "]
    if r.pooler_by_hand_max_abs_diff is not None:
        ok = "equal" if r.pooler_by_hand_max_abs_diff < 1e-5 else "NOT equal"
        lines[-1] += (f"Recomputed by hand as {r.pooler_formula} from `last_hidden_state[:, 0]`: max abs "
                      f"difference from `pooler_output` = **{r.pooler_by_hand_max_abs_diff:.2e}** ({ok}).")
    else:
        lines[-1] += r.pooler_formula + "."
    lines += ["", "**How far apart are the vectors a classifier could read?** (cosine similarity)", "",
              "| pair | cosine |", "|---|---|"]
    lines += [f"| `{a}` vs `{b}` | {c:.3f} |" for (a, b), c in r.cosine.items()]
    lines += ["", "Norms: " + ", ".join(f"`{n}` {v:.2f}" for n, v in r.norms.items()) + ".",
              "", f"**This model's pooler:** {r.pooler_provenance}."]
    return "\n".join(lines)


@_shown("", md=(0,))
def look_inside(model_text: str, text: str):
    name = serve.model_name(model_text)
    return (_inside_markdown(serve.look_inside(name, serve.check_text(text, "sentence"))),)


# --- Leaderboard --------------------------------------------------------------------------------------

FIGURES = ("ablation", "layers", "heatmap", "significance", "models", "pooler_effect", "learning_curves",
           "every_layer", "span_vector")


def _filter(value):
    return None if value in (None, "", "all") else value


def _csv_file(text: str) -> str:
    """The table as a CSV file for the download button; named by content, so a repeated view reuses it."""
    CSV_DIR.mkdir(parents=True, exist_ok=True)
    path = CSV_DIR / f"berteval-leaderboard-{hashlib.sha256(text.encode()).hexdigest()[:12]}.csv"
    if not path.exists():
        path.write_text(text, encoding="utf-8")
    return str(path)


def _count_line(v: dict, search: str | None) -> str:
    """What the table shows, in words: its rows and the records behind them, and what a search left out (the
    search narrows the table only; the figures keep every record the filters match)."""
    rows, matched = len(v["table"]), v["n_records"]
    behind = int(v["table"]["n_seeds"].sum()) if rows else 0  # each row aggregates its seeds' records
    if not matched:
        return "No rows shown: no records match these filters."
    if search and behind < matched:
        found = (f"{rows} rows shown, those matching the search “{search}” ({behind} records)" if rows else
                 f"No rows shown: nothing matches the search “{search}”")
        return f"{found}; {matched} records match the filters, and the figures show all of them."
    return f"{rows} rows shown, one per setup: {matched} records match the filters, aggregated over seeds."


@_shown("", EMPTY_TABLE, None, *(None for _ in FIGURES), md=(0,))
def board(model, task, pooling, regime, search):
    v = leaderboard.views(model=_filter(model), task=_filter(task), pooling=_filter(pooling),
                          regime=_filter(regime), search=search or None)
    summary = _count_line(v, search)
    if v["problems"]:
        summary += "\n\nSkipped bad record lines: " + "; ".join(f"`{p}`" for p in v["problems"][:5])
    summary += _estimates_markdown(v.get("estimates"))
    shown = v["table"][TABLE_SHOWN].round({"ci95_low": 4, "ci95_high": 4})
    return (summary, shown, _csv_file(v["csv"]), *(v[f] for f in FIGURES))


def _estimates_markdown(est) -> str:
    """The k-fold records, listed beside the table and never ranked in it (their heads trained on dev articles)."""
    if est is None or est.empty:
        return ""
    rows = "\n".join(f"| {r.regime} | {r.split} | {r.n_train:,} | {r.n_eval:,} | {r.metrics.get('exact_match', 0):.2f} | "
                     f"{r.metrics.get('f1', 0):.2f} | `{r.run_id}` |" for r in est.itertuples())
    return ("\n\n**Shown apart, never ranked:** k-fold estimates of the Answer tab's demo head (each dev question "
            "answered by a head trained on the other dev articles; not official-dev scores).\n\n"
            "| regime | split | train | scored | EM | F1 | record |\n|---|---|---|---|---|---|---|\n" + rows)


def board_choices():
    choices = leaderboard.views()["choices"]
    return tuple(gr.update(choices=["all", *choices[f]]) for f in ("model", "task", "pooling", "regime"))


def board_context(model, task, pooling, regime):
    """The findings (first in the tab) and the published reference numbers, for the current filters."""
    try:
        df, _ = leaderboard.data.load()
        # A finding compares heads: the pooling filter does not narrow it.
        rows = leaderboard.data.filter_records(df, model=_filter(model), task=_filter(task), regime=_filter(regime))
        found = leaderboard.findings.as_markdown(leaderboard.findings.findings(rows))
        return (markup.safe_markdown(f"### Findings\n{found}"),
                leaderboard.references.table(_filter(task), _filter(regime)))
    except Exception:  # noqa: BLE001: the tab still shows everything else
        log.exception("findings failed")
        return "⚠️ Findings could not be written (the server log has the reason).", EMPTY_REFS


def board_from_url(request: gr.Request):
    """Page load: a link with leaderboard query parameters opens the tab on that view (filters set from the URL)."""
    choices = leaderboard.views()["choices"] if request is not None and request.query_params else None
    state = leaderboard.urlstate.from_query(getattr(request, "query_params", None), choices or {})
    if not state["shared"]:
        return (gr.skip(), *(gr.skip() for _ in leaderboard.urlstate.FILTERS), gr.skip(), False, "")
    drops = [gr.update(choices=["all", *choices[f]], value=state["filters"][f]) for f in leaderboard.urlstate.FILTERS]
    return (gr.Tabs(selected="leaderboard"), *drops, state["search"], True,
            markup.safe_markdown("\n\n".join(state["notes"])))


def board_if_shared(shared, model, task, pooling, regime, search):
    """After page load: build the tab once for a shared link; nothing for a plain visit."""
    n = 4 + len(FIGURES) + 2
    if not shared:
        return tuple(gr.skip() for _ in range(n))
    return (*board(model, task, pooling, regime, search), *board_context(model, task, pooling, regime))


def disagree_heads(model, task, regime, seed):
    """The two head pickers: the heads of the run the filters name."""
    df, _ = leaderboard.data.load()
    heads = leaderboard.disagreements.heads(df, _filter(task), _filter(model), _filter(regime), seed)
    return (gr.update(choices=heads, value=heads[0] if heads else None),
            gr.update(choices=heads, value=heads[1] if len(heads) > 1 else None))


def disagree(model, task, regime, seed, head_a, head_b):
    """The examples two heads of one run disagree on (the same code as `python -m berteval disagree`)."""
    df, _ = leaderboard.data.load()
    try:
        from berteval.config import data_dir

        folder = data_dir(None)
    except BertevalError:
        folder = None
    summary, table = leaderboard.disagreements.view(df, _filter(task), _filter(model), _filter(regime), seed, head_a,
                                                    head_b, data_dir=folder, limit=25)
    return markup.safe_markdown(markup.redact_paths(summary)), table.map(markup.neutral)


# --- The page -----------------------------------------------------------------------------------------

def _note(text: str) -> None:
    gr.Markdown(text, elem_classes=["berteval-note"])


def _status_box(key: str) -> gr.Markdown:
    """The tab's message box, hidden until a handler has something to say."""
    return gr.Markdown(visible=False, elem_id=f"{key}-status", elem_classes=["berteval-status"])


def _wire(key: str, button: gr.Button, fn, inputs: list, outputs: list, api_name: str) -> None:
    """The tab's examples (filling the inputs after the model box) and its button, wired to `fn`."""
    gr.Examples(EXAMPLES[key], inputs[1:], label="Examples", elem_id=f"{key}-examples")
    button.click(fn, inputs, outputs, api_name=api_name)


def _classify_tab(model_box: gr.Dropdown) -> None:
    """Sentence -> label, by the committed SST-2 probe head on the chosen vector."""
    _note("A sentence → positive / negative, by the committed SST-2 probe head reading the vector you "
          "choose.")
    with gr.Row():
        with gr.Column():
            sentence = gr.Textbox(label="Sentence", lines=2, elem_id="classify-sentence")
            pooling = gr.Radio(list(HEADS), value="mean", label="The head reads")
            go_classify = gr.Button("Classify", variant="primary")
        with gr.Column():
            label = gr.Label(label="Sentiment", num_top_classes=2, elem_id="classify-label")
            about = gr.Markdown(elem_id="classify-about")
            compare = gr.Markdown(elem_id="classify-compare")
    status = _status_box("classify")
    _wire("classify", go_classify, classify, [model_box, sentence, pooling], [label, about, compare, status],
          "classify")


def _answer_tab(model_box: gr.Dropdown) -> None:
    """Question + context -> span, n-best and the start/end logits."""
    _note("A question and a context → the answer span. The head scores every token twice (start and "
          "end); the chart shows both. " + QA_LIMITS)
    with gr.Row():
        with gr.Column():
            question = gr.Textbox(label="Question", max_lines=2, elem_id="qa-question")
            context = gr.Textbox(label="Context", lines=7, elem_id="qa-context")
            go_answer = gr.Button("Answer", variant="primary")
        with gr.Column():
            highlighted = gr.HighlightedText(label="Answer in the context", color_map={"answer": "#2ca02c"},
                                             show_inline_category=False, elem_id="qa-highlight")
            qa_about = gr.Markdown(elem_id="qa-about")
    qa_status = _status_box("qa")
    nbest = gr.Dataframe(EMPTY_NBEST, label="n-best answers", interactive=False, wrap=True, elem_id="qa-nbest",
                         column_widths=["7%", "45%", "13%", "15%", "12%", "8%"])
    qa_plot = gr.Plot(label="Start and end logits", elem_id="qa-logits")
    _wire("qa", go_answer, answer, [model_box, question, context],
          [highlighted, nbest, qa_plot, qa_about, qa_status], "answer")


def _nsp_tab(model_box: gr.Dropdown) -> None:
    """Sentence A + sentence B -> P(IsNext), by the pretrained NSP head or a probe."""
    _note("Sentence A and sentence B → does B follow A? BERT's pre-training asked exactly this, through "
          "the pooler.")
    with gr.Row():
        with gr.Column():
            sent_a = gr.Textbox(label="Sentence A", lines=2, elem_id="nsp-a")
            sent_b = gr.Textbox(label="Sentence B", lines=2, elem_id="nsp-b")
            go_nsp = gr.Button("Does B follow A?", variant="primary")
        with gr.Column():
            nsp_label = gr.Label(label="Next sentence", num_top_classes=2, elem_id="nsp-label")
            nsp_about = gr.Markdown(elem_id="nsp-about")
    nsp_status = _status_box("nsp")
    _wire("nsp", go_nsp, next_sentence, [model_box, sent_a, sent_b], [nsp_label, nsp_about, nsp_status],
          "next_sentence")


def _inside_tab(model_box: gr.Dropdown) -> None:
    """One input's hidden states, the pooler recomputed by hand, and the distances between vectors."""
    _note("What `last_hidden_state` and `pooler_output` are for one input, the pooler recomputed by "
          "hand, and how far apart `cls`, `pooler` and `mean` are.")
    inside_text = gr.Textbox(label="Input", lines=2, elem_id="inside-text")
    go_inside = gr.Button("Look inside", variant="primary")
    inside_status = _status_box("inside")
    inside_report = gr.Markdown(elem_id="inside-report")
    _wire("inside", go_inside, look_inside, [model_box, inside_text], [inside_report, inside_status],
          "inside")


def _leaderboard_tab(board_tab: gr.Tab) -> SimpleNamespace:
    """Findings, filters, table, figures and the disagreement viewer; built when the tab is opened.
    Returns the components the page's shared-link handler sets (filters, search, url_note) and fills."""
    findings_box = gr.Markdown(elem_id="board-findings")
    _note("Every committed result record, aggregated over seeds. Filters apply to the findings, the table "
          "and the figures, and live in the page's address: copy it to share this view. `band`: heads in "
          "one band are not separated by the paired tests (McNemar, every seed, Holm-corrected).")
    with gr.Row():
        filters = [gr.Dropdown(["all"], value="all", label=f, allow_custom_value=True, elem_id=f"board-{f}")
                   for f in ("model", "task", "pooling", "regime")]
        search = gr.Textbox(label="search (Enter)", placeholder="words that every row must contain",
                            max_lines=1, elem_id="board-search")
    board_status = _status_box("board")
    url_note = gr.Markdown(elem_id="board-url-note")
    summary = gr.Markdown(elem_id="board-summary")
    table = gr.Dataframe(EMPTY_TABLE, label="Leaderboard", interactive=False, max_height=640,
                         elem_id="board-table")
    with gr.Row():
        download = gr.DownloadButton("Download CSV (every column)", size="sm", scale=0, min_width=220,
                                     elem_id="board-csv")
    with gr.Accordion("The examples behind a paired test: where two heads of one run disagree",
                      open=False, elem_id="board-disagree"):
        _note("Pick a model, task and regime in the filters above, a seed, and two heads.")
        with gr.Row():
            seed = gr.Dropdown(["0", "1", "2"], value="0", label="seed", allow_custom_value=True, scale=0,
                               min_width=100)
            head_a = gr.Dropdown([], label="head A", allow_custom_value=True, elem_id="board-head-a")
            head_b = gr.Dropdown([], label="head B", allow_custom_value=True, elem_id="board-head-b")
            go_disagree = gr.Button("Show the disagreements", scale=0, min_width=200)
        disagree_summary = gr.Markdown(elem_id="board-disagree-summary")
        disagree_table = gr.Dataframe(interactive=False, wrap=True, max_height=520,
                                      elem_id="board-disagree-table")
    plots = [gr.Plot(label=f) for f in FIGURES]
    gr.Markdown("**Published numbers for context** (other models, data and protocols; never ranked with "
                "the measured rows)")
    refs = gr.Dataframe(EMPTY_REFS, interactive=False, wrap=True, elem_id="board-references")
    outputs = [summary, table, download, *plots, board_status]
    context = [findings_box, refs]
    inputs = [*filters, search]
    # User edits only (.input / Enter): the URL handler below sets the filters without re-running this.
    # The browser first writes the filters into the address bar (js), then the handler runs.
    for control in filters:
        control.input(board, inputs, outputs, js=leaderboard.urlstate.SYNC_JS, api_visibility="private")
        control.input(board_context, filters, context, api_visibility="private")
    search.submit(board, inputs, outputs, js=leaderboard.urlstate.SYNC_JS, api_visibility="private")
    # Built when the tab is opened, not on every page load: records are re-read each time (a run
    # may have added some), and a visitor who never opens the tab costs nothing.
    board_tab.select(board_choices, None, filters, api_visibility="private")
    board_tab.select(board, inputs, outputs, api_name="leaderboard")
    board_tab.select(board_context, filters, context, api_visibility="private")
    run_filters = [filters[0], filters[1], filters[3], seed]
    for control in (filters[0], filters[1], filters[3], seed):
        control.input(disagree_heads, run_filters, [head_a, head_b], api_visibility="private")
    board_tab.select(disagree_heads, run_filters, [head_a, head_b], api_visibility="private")
    go_disagree.click(disagree, [*run_filters, head_a, head_b], [disagree_summary, disagree_table],
                      api_name="disagree")
    return SimpleNamespace(filters=filters, search=search, url_note=url_note, inputs=inputs, outputs=outputs,
                           context=context)


def build_demo() -> gr.Blocks:
    with gr.Blocks(title="berteval: BERT's heads, tried by hand", analytics_enabled=False) as page:
        gr.Markdown(INTRO)
        model_box = gr.Dropdown(serve.suggested_models(), value=serve.DEFAULT_MODEL, label="Encoder",
                                allow_custom_value=True, filterable=True, elem_id="model",
                                info="Offline: 'default' (the embedded all-MiniLM-L6-v2) and encoders derived from it "
                                     "(+nsp-pooler: its pooler trained by next-sentence prediction; +mlm-nsp: BERT's "
                                     "pre-training continued; +random: the untrained floor). A hub id such as "
                                     "bert-base-uncased works where the hub is reachable; there the list also offers "
                                     "SQuAD checkpoints, whose own QA head answers in the Answer tab.")
        with gr.Tabs() as tabs:
            with gr.Tab("Classify", id="classify"):
                _classify_tab(model_box)

            with gr.Tab("Answer", id="answer"):
                _answer_tab(model_box)

            with gr.Tab("Next sentence", id="nsp"):
                _nsp_tab(model_box)

            with gr.Tab("Inside BERT", id="inside"):
                _inside_tab(model_box)

            with gr.Tab("Leaderboard", id="leaderboard") as board_tab:
                shown = _leaderboard_tab(board_tab)
        # A shared link (?tab=leaderboard&task=...) opens on that view: filters from the URL, then the tab built once.
        shared = gr.State(False)
        page.load(board_from_url, None, [tabs, *shown.filters, shown.search, shared, shown.url_note],
                  api_visibility="private").then(
            board_if_shared, [shared, *shown.inputs], [*shown.outputs, *shown.context], api_visibility="private")
        _note(SERVING)
    page.queue(default_concurrency_limit=CONCURRENCY, max_size=QUEUE_SIZE)
    return page


# How the page is served (`main`, and the tests that serve it in-process). show_error: a request Gradio itself
# refuses before any handler runs (too few inputs, a value not among a control's choices) carries its reason;
# without it an API caller got {"error": null}. The handlers catch every error of their own and answer with a
# message, so what this shows is Gradio's word on the request, never a traceback. state_session_capacity: Gradio
# keeps each session's copy of the page's component config (about 0.3 MB here; every API call is a new session)
# for the last 10,000 sessions by default: the server grew by ~25 MB per 100-request burst, toward 3 GB. The page
# keeps no gr.State, so an evicted session loses nothing a visitor sees.
SESSIONS_KEPT = 256
LAUNCH = dict(ssr_mode=False, show_error=True, theme=THEME, css=CSS, footer_links=["api", "gradio"],
              state_session_capacity=SESSIONS_KEPT)


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """--host and --port, defaulting to Gradio's own environment variables (a Space sets them)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", "7860")))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = options(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    torch.set_num_threads(TORCH_THREADS)
    from berteval import devices

    log.info("serving on %s", devices.use(None))  # BERTEVAL_DEVICE (auto: CUDA when present, else the CPU)
    for problem in serve.warm(serve.DEFAULT_MODEL):  # load once before the first visitor; say what is missing
        log.warning("not available yet: %s", problem)
    build_demo().launch(server_name=args.host, server_port=args.port, **LAUNCH)


if __name__ == "__main__":
    sys.exit(main())
