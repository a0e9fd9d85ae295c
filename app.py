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
import threading
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # offline: no telemetry or version calls

import gradio as gr  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

import leaderboard  # noqa: E402
from berteval import markup, precision, serve  # noqa: E402
from berteval.serve import budget, guard  # noqa: E402
from berteval.errors import BertevalError  # noqa: E402
from berteval.models.pretrained import PRETRAINED  # noqa: E402
from berteval.qa import DEFAULTS as QA  # noqa: E402
from leaderboard.figures import qa_logits  # noqa: E402
from leaderboard.references import squad_scale  # noqa: E402

log = logging.getLogger("berteval.app")

HEADS = ("cls", "pooler", "mean")  # the three vectors a sentence classifier can read
# One request per core: each runs torch on one thread, so two requests use both cores of
# this machine instead of fighting over them (intra-op threads on a tiny input mostly spin).
CONCURRENCY = int(os.environ.get("BERTEVAL_APP_CONCURRENCY", "2"))
# Each action has its own lane of Gradio's queue (concurrency_id), so a burst of one (eight 10-window answers)
# cannot hold the others back. Answer runs more at once than it has cores: its long contexts wait in
# serve.budget's heavy lane (2 computing, 8 admitted), so a short answer always has a free slot beside them
# and the OS shares the cores between them instead of queueing the short one behind 20 s of long ones.
LANES = {"classify": CONCURRENCY, "answer": budget.HEAVY_ADMITTED + 2 * CONCURRENCY, "next_sentence": CONCURRENCY,
         "inside": CONCURRENCY}
TORCH_THREADS = int(os.environ.get("BERTEVAL_APP_THREADS", "1"))
# Classify and Answer run on the fp32 weights, or on a bf16 copy where the host's speed matters more than the
# last digit: bf16 weights made the QA pass 2.6x faster on an AMX Xeon and 1.6x here, and changed 3 of 400 SQuAD
# answers and up to 7 of 872 SST-2 verdicts (README, Performance). fp32 answers are the records' answers.
SERVE_DTYPE = os.environ.get("BERTEVAL_APP_DTYPE", "fp32")
if SERVE_DTYPE not in precision.DTYPES:
    raise SystemExit(f"BERTEVAL_APP_DTYPE={SERVE_DTYPE!r}: use fp32 (the default) or bf16")
# Requests waiting, all lanes together: 100 visitors pressing Classify at once all wait (each ~50 ms) rather
# than 36 of them being refused; past it the browser says "This application is currently busy".
QUEUE_SIZE = 256
N_BEST_SHOWN = 10
# What the page promises, stated on it (the numbers are the ones enforced: serve.LIMITS, the queue below).
QA_LIMITS = (f"Contexts up to {serve.LIMITS['context']:,} characters and {budget.MAX_WINDOWS} windows; one longer "
             f"than a {QA.max_length}-token window is read in overlapping windows ({QA.doc_stride} tokens shared) and "
             f"the best span of any window wins.")
SERVING = (f"Served by one queue with a lane per action: {CONCURRENCY} requests at a time per action (Answer: "
           f"{LANES['answer']}, of which {budget.HEAVY_RUNNING} long contexts computing), up to {QUEUE_SIZE} waiting; "
           f"Classify and Answer on {'a bf16 copy of the' if SERVE_DTYPE == 'bf16' else 'the fp32'} weights. Work "
           f"per request: each encoder reads at most 128 tokens of a sentence (longer text is cut, and the page "
           f"says so), an answer at most {budget.MAX_WINDOWS} windows of {QA.max_length} tokens. Input "
           f"limits: sentence {serve.LIMITS['sentence']:,} characters, question {serve.LIMITS['question']:,}, "
           f"context {serve.LIMITS['context']:,}; longer input is refused with a message. No file uploads.")
NBEST_COLUMNS = ["rank", "answer", "probability", "start + end logit", "characters", "window"]
EMPTY_NBEST = pd.DataFrame(columns=NBEST_COLUMNS)
# The page shows the columns a reader compares, the model first and by its short name, so the table fits the page
# (with the reproduce command and record ids it was 3,590 px wide in a 1,216 px box, the model off-screen: issue 42);
# the CSV download keeps every column, the command and the record ids included.
TABLE_SHOWN = ["model", "task", "regime", "pooling", "layer", "metric", "mean ± std", "band", "95% CI", "seeds",
               "train", "eval"]
# Widths sum to 95%: each cell's padding comes on top, and at 100% the last column fell outside the 1,216 px box.
TABLE_WIDTHS = ["17%", "5%", "8%", "9%", "5%", "7%", "12%", "5%", "12%", "5%", "5%", "5%"]
EMPTY_TABLE = pd.DataFrame(columns=TABLE_SHOWN)
EMPTY_REFS = pd.DataFrame(columns=["published model", "task", "regime", "head reads", "metric", "published value",
                                   "source", "not the same as berteval's setting"])
CSV_DIR = Path(tempfile.gettempdir()) / "berteval-app"

# System fonts: Gradio's bundled Source Sans Pro SemiBold lacks most capitals, so bold text mixed two fonts
# ("BERT" drawn with a small B); one system stack renders every weight from one family, offline too.
# Help text under a control (the Encoder box's `info`) in Gradio's default, neutral-400 at 12 px, is about 1.9:1 on
# white; WCAG AA asks 4.5:1 for body text. neutral-600 is about 7.5:1, and 14 px reads without zooming.
THEME = gr.themes.Default(font=("ui-sans-serif", "system-ui", "sans-serif")).set(
    block_info_text_color="*neutral_600", block_info_text_color_dark="*neutral_300", block_info_text_size="*text_md")
CSS = """
.berteval-status { border: 1px solid #e5a50a; background: #fff8e1; border-radius: 6px; padding: 8px 12px; }
.berteval-status p { margin: 0; color: #5c4400; }
.berteval-note p { color: #555; font-size: 0.92em; }
/* The answer inside its context reads as running text: Gradio lays each span out as its own flex item
   (the answer jumps to a line of its own) and breaks words anywhere ("na|me"). */
#qa-highlight .textfield, #qa-whole .textfield { display: block; word-break: normal; overflow-wrap: anywhere; }
#qa-highlight .token-container, #qa-highlight .token, #qa-whole .token-container, #qa-whole .token { display: inline; }
/* The heads side by side: a header or a verdict wraps between words, never inside one ("P(paraphra|se)"). */
#classify-compare th, #classify-compare td { word-break: normal !important; overflow-wrap: normal !important; }
#classify-compare td:nth-child(-n+3), #classify-compare th:nth-child(-n+3) { white-space: nowrap; }
"""

INTRO = """# berteval: BERT's heads, tried by hand
Sentence classification reads **one vector** per input (the `[CLS]` state, `pooler_output` or a mean over
tokens); extractive QA reads **every token**, twice (a start and an end logit); next-sentence prediction reads
the pooler. Try each below, look inside the encoder, and compare the measured heads on the leaderboard."""

EXAMPLES = {
    "classify": [  # sentence (A), the vector, task, sentence B
        ["A gorgeous, witty, seductive movie.", "mean", "sst2", ""],
        ["The plot is a mess and the acting is even worse.", "cls", "sst2", ""],
        ["It's not a bad film, just a forgettable one.", "pooler", "sst2", ""],
        ["The company said its third-quarter profit rose 12 percent.",
         "mean", "mrpc", "Third-quarter profit at the company was up 12 percent, it said."],
        ["A man is playing a guitar.", "mean", "stsb", "A man plays the guitar on stage."],
        ["The museum in the old town hall opened to visitors in 1998.", "mean", "rte",
         "The museum opened in 1998."],
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
    "inside": [["The cat sat on the mat."], ["The cat sat on the [MASK]."],
               ["BERT reads every token, but a classifier reads one vector."]],
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
            _stamp(fn.__name__, args)
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
        run.empty = empty  # what the tab shows with no answer (also when an input changes: `_wire`)
        return run
    return wrap


# What each visitor's tab last answered, as a digest of its inputs: {(session, handler): digest}, the newest kept.
# A clear triggered before a click (a text box's change fires when it loses focus, i.e. on the click itself) can
# reach the server after the answer; it must not empty an answer that belongs to the inputs shown (`_wire`).
_STAMPS: dict[tuple[str, str], str] = {}
_STAMPS_KEPT = 4096
_STAMPS_LOCK = threading.Lock()


def _digest(values) -> str:
    plain = [v for v in values if not isinstance(v, (gr.Request, gr.Progress))]
    return hashlib.sha256(repr(plain).encode("utf-8", "surrogatepass")).hexdigest()


def _stamp(handler: str, args) -> None:
    """Note which inputs this visitor's tab is answering (a call with no request, as in the tests: nothing)."""
    request = next((a for a in args if isinstance(a, gr.Request)), None)
    session = getattr(request, "session_hash", None)
    if session is None:
        return
    with _STAMPS_LOCK:
        _STAMPS.pop((session, handler), None)
        _STAMPS[(session, handler)] = _digest(args)
        while len(_STAMPS) > _STAMPS_KEPT:
            _STAMPS.pop(next(iter(_STAMPS)))


def _answered(handler: str, request, values) -> bool:
    """The tab's last answer (or message) was for exactly these inputs."""
    session = getattr(request, "session_hash", None)
    with _STAMPS_LOCK:
        return session is not None and _STAMPS.get((session, handler)) == _digest(values)


def _cut(reading) -> str:
    """A line above the result when the model read only part of the input (empty when it read all of it)."""
    note = reading.note() if reading is not None else ""
    return f"✂️ **Cut to fit: {note}.**\n\n" if note else ""


# --- Classify -----------------------------------------------------------------------------------------

def _head_line(head: serve.TaskHead) -> str:
    return f"dev {head.figures()} (seed {head.seed}; {head.seeds_mean()}), record `{head.run_id}`"


def _notes(reading) -> str:
    """Lines above a result: the input was cut to fit, or was mostly unknown tokens (empty when neither)."""
    unknown = reading.unknown_note() if reading is not None else ""
    return _cut(reading) + (f"⚠️ **{unknown[0].upper() + unknown[1:]}.**\n\n" if unknown else "")


def _classify_input(task, sentence: str, sentence_b: str):
    """The text a head reads: one sentence, or the (A, B) pair of a pair task."""
    if not task.pair:
        return serve.check_text(sentence, "sentence")
    return (serve.check_text(sentence, "sentence", name="sentence A"),
            serve.check_text(sentence_b, "sentence", name="sentence B"))


def _classify_head(clf, task, pooling: str, what: str) -> str:
    """Which head answered, in words: a committed probe (its record), or a quick probe trained here now."""
    head = clf.heads[pooling]
    kind = "ridge regression" if task.regression else "logistic-regression probe"
    if clf.origin == "quick":
        q = clf.quick
        return (f"**Head:** a quick probe trained here on demand, since no committed record measures "
                f"{clf.model.model_id}: a {kind} on `{pooling}` (last layer), trained on {head.n_train:,} of a fixed "
                f"sample of {q.n_train:,} SST-2 train sentences ({q.n_train - head.n_train:,} held out to pick its "
                f"regularisation), from {q.data}; dev accuracy **{head.dev_value:.4f}** on all {q.n_eval:,} SST-2 dev "
                f"sentences. Kept for this model revision while the server runs; never a leaderboard record.")
    return (f"**Head:** {kind} on `{pooling}` (last layer) of {clf.model.model_id}, trained on "
            f"{head.n_train:,} {task.label} {what}; {_head_line(head)}.")


def _tuned_head(clf, task, head: serve.TaskHead, probe: serve.TaskHead, what: str) -> str:
    """A fine-tune's adapter answered (it beats this encoder's probe on the same reading): which, and why."""
    return (f"**Head:** a fine-tune of {head.encoder} reading `{head.pooling}` (last layer): LoRA adapters on its "
            f"encoder + the pooled head (`--regime finetune-lora`, committed with its record), trained on "
            f"{head.n_train:,} {task.label} {what}; {_head_line(head)}. It is the best committed {task.label} head "
            f"reading `{head.pooling}` that this page can serve, so it answers whichever encoder is chosen; "
            f"{clf.model.model_id}'s own probe on `{probe.pooling}` (dev {probe.figures()}) is in the table below.")


def _classify_checkpoint(clf, probs: dict, reading) -> tuple:
    """The checkpoint's own sequence-classification head answers (no committed record for this model), with its
    SST-2 dev accuracy measured here (or why there is none)."""
    labels = ", ".join(f"`{x}`" for x in clf.checkpoint.labels)
    dev = clf.checkpoint_dev
    if dev is not None and dev.accuracy is not None:
        how = f" ({dev.note})" if dev.note else ""
        figure = (f"Measured here on all {dev.n_eval:,} SST-2 dev sentences from {dev.data}{how}: dev accuracy "
                  f"**{dev.accuracy:.4f}**. Kept for this model revision while the server runs; never a leaderboard "
                  f"record.")
    else:
        why = dev.missing if dev is not None and dev.missing else "it was not measured here"
        figure = f"No dev figure: {why}."
    about = _notes(reading) + (f"**Head:** {clf.model.model_id}'s own sequence-classification head, as its "
                               f"checkpoint ships it (labels {labels}; it reads {clf.checkpoint.reads}). {figure}")
    return probs, about, "The checkpoint's own head answers; the pooling choice does not apply to it."


@_shown(None, "", "", md=(1, 2))
def classify(model_text: str, sentence: str, pooling: str, task: str = "sst2", sentence_b: str = "",
             progress=gr.Progress(), request: gr.Request = None):
    name = serve.model_name(model_text)
    t = serve.page_task(task)
    text = _classify_input(t, sentence, sentence_b)
    clf, values, reading = serve.classify(name, text, HEADS, SERVE_DTYPE, task=t.name,
                                          progress=lambda fraction, what: progress(fraction, desc=what))
    if clf.origin == "checkpoint":
        return _classify_checkpoint(clf, values, reading)
    heads = {p: clf.heads[p] for p in values}
    if pooling not in heads:
        raise BertevalError(f"no {t.label} head reads `{pooling}` for {clf.model.model_id}; "
                            f"available: {', '.join(heads) or 'none'}.")
    what = "pairs" if t.pair else "sentences"
    probe = heads[pooling]
    # A pair task answers with the best committed head on this reading that can be served: a fine-tune's adapter
    # where its dev figure is above this encoder's probe (issue 42: MRPC's and RTE's probes are at chance).
    head = serve.served_head(t.name, probe) if t.pair else probe
    value = values[pooling] if head is probe else serve.served_output(head, text, SERVE_DTYPE)
    unknown = reading is not None and reading.mostly_unknown  # said in the answer line itself, not again below it
    about = (_answer_line(t, head, value, reading) + (_cut(reading) if unknown else _notes(reading))
             + (_classify_head(clf, t, pooling, what) if head is probe else _tuned_head(clf, t, head, probe, what)))
    if pooling == "pooler":
        about += f"\n\n**This model's pooler** is {clf.model.heads.pooler_provenance}."
    about += _best_elsewhere(t, head)
    tuned = None if head is probe else (head, value)
    return _big_answer(t, head, value, reading), about, _compare_table(t, heads, values, tuned)


def _at_chance(head: serve.TaskHead) -> bool:
    return head.baseline is not None and not head.baseline.beaten


def _verdict(t, value: float) -> str:
    if t.regression:
        low, high = t.score_range
        return f"similarity {min(max(value, low), high):.2f} of {high:g}"
    no, yes = t.labels
    return yes if value >= 0.5 else no


def _big_answer(t, head: serve.TaskHead, value: float, reading):
    """The answer in large type: none for an input that is mostly [UNK] (the head read almost nothing of it), and
    for a head no better than the majority class the verdict says so itself."""
    if reading is not None and reading.mostly_unknown:
        return None
    suffix = " · at chance" if _at_chance(head) else ""
    if t.regression:
        return _verdict(t, value) + suffix
    no, yes = t.labels
    return {yes + suffix: value, no + suffix: 1.0 - value}


def _answer_line(t, head: serve.TaskHead, value: float, reading) -> str:
    """The answer in words, first: with what the head is worth said in the same sentence where it is worth little
    (no better than the majority class or chance), or where the input was mostly [UNK]."""
    verdict = _verdict(t, value)
    shown = f"score {value:.2f}" if t.regression else f"P({verdict}) = {max(value, 1.0 - value):.2f}"
    answer = f"**Answer: {verdict}**" + ("" if t.regression else f" ({shown})")
    base = head.baseline
    if reading is not None and reading.mostly_unknown:
        return (f"⚠️ **No answer for this input:** it is mostly `[UNK]` to this model, which read almost "
                f"nothing of it; the head's output ({shown}) is what any such text gets.\n\n")
    if base is None:
        return answer + ".\n\n"
    if not base.beaten:
        figure = f"{head.dev_value:.3f}" if head.dev_value <= 1 else f"{head.dev_value:.1f}"
        return (f"⚠️ {answer}, **but this head is no better than {base.what}**: its dev figure {figure} against "
                f"{base.value:.3f} for {base.what} (one-sided exact McNemar test on the same {head.n_eval:,} dev "
                f"examples, p = {base.p_value:.2f}), so this verdict says next to nothing about the input. "
                f"{_better_reading(t, head)}\n\n")
    against = (f"beats chance (Pearson {head.dev_value:.1f} of 100 on dev; 0 is chance, 100 perfect)"
               if t.regression else f"beats {base.what} ({head.dev_value:.3f} against {base.value:.3f} on dev, "
                                    f"p = {base.p_value:.2g})")
    return f"{answer}: this head {against}.\n\n"


def _better_reading(t, head: serve.TaskHead) -> str:
    """Where a served head is at chance: the committed head reading the same vector that does beat the majority
    class, on another offline encoder (the visitor picks it in the Encoder box), or that none does."""
    found = serve.best_beating(t.name, head.pooling)
    if found is None:
        return f"No committed {t.label} probe reading `{head.pooling}` on any encoder here beats it."
    name, better = found
    return (f"One that does: {name}'s probe on `{head.pooling}` (dev {better.dev_value:.3f} against "
            f"{better.baseline.value:.3f}, p = {better.baseline.p_value:.2g}); pick {name} in the Encoder box.")


def _best_elsewhere(t, head: serve.TaskHead) -> str:
    """Where the served head is not the best the records measure: which is, and why it does not answer here."""
    best = serve.best_measured(t.name)
    if best is None or best.regime in ("probe", serve.tuned.REGIME) or best.mean <= head.mean_main:
        return ""
    figure = f"{best.mean:.3f}" if best.mean <= 1 else f"{best.mean:.1f}"
    return (f"\n\n**The best measured {t.label} head** is a fine-tune of {best.model} reading `{best.pooling}` "
            f"({figure} mean over {best.n_seeds} seeds; see the leaderboard). It does not answer here: that "
            f"fine-tune trained the whole encoder (90 MB) and kept no weights to serve, so the page serves the best "
            f"committed head it has weights for.")


def _compare_table(t, heads: dict, values: dict, tuned: tuple | None = None) -> str:
    """The same input under every head, each with its dev figures and whether it beats the majority class; a
    fine-tune's adapter that answered (`tuned`: its head and output) first."""
    def beats(h) -> str:
        return "–" if h.baseline is None else ("yes" if h.baseline.beaten else "**no**")

    passes = "one forward pass feeds all of them"
    if tuned is not None:  # its row under a name of its own (its encoder is named above), the probes' by pooling
        head, value = tuned
        heads = {f"{head.pooling} · fine-tuned": head, **heads}
        values = {f"{head.pooling} · fine-tuned": value, **values}
        passes = f"the fine-tune on {head.encoder} answers; one forward pass feeds the probes"
    subject = "pair" if t.pair else "sentence"
    if t.regression:
        low, high = t.score_range
        rows = "\n".join(f"| `{h}` | {values[h]:.2f} | {heads[h].figures()} | {beats(heads[h])} |" for h in heads)
        return (f"**The same pair under every head** ({passes}; scores outside "
                f"{low:g}-{high:g} are shown as computed and clipped above):\n\n"
                "| head reads | score (0-5) | its dev figures | beats chance? |\n|---|---|---|---|\n" + rows)
    no, yes = t.labels
    rows = "\n".join(f"| `{h}` | {values[h]:.3f} | {yes if values[h] >= 0.5 else no} | {heads[h].figures()} | "
                     f"{beats(heads[h])} |" for h in heads)
    return (f"**The same {subject} under every head** ({passes}; a head that does not beat "
            f"the majority class says little):\n\n| head reads | P({yes}) | verdict | its dev figures | beats the "
            f"majority class? |\n|---|---|---|---|---|\n" + rows)


def classify_inputs(task: str):
    """A pair task shows sentence B; the labels follow the task."""
    t = serve.PAGE_TASKS.get(task)
    pair = bool(t and t.pair)
    return gr.update(label="Sentence A" if pair else "Sentence"), gr.update(visible=pair)


# --- Answer -------------------------------------------------------------------------------------------

NOT_IN_TEXT = "probably not in this text"


def _confidence_line(conf) -> str:
    """The score beside the n-best probabilities, and what it means, in one line."""
    if conf is None:
        return ""
    score = (f"**Score:** the best span's start + end logit is {conf.best:.2f}, the `[CLS]` token's (the "
             f"no-answer reading) {conf.null:.2f}: a margin of **{conf.margin:.2f}**.")
    cal = conf.calibration
    if cal is None:
        return (score + " This head is not calibrated here, so whether the text holds an answer at all is not "
                "measured: the n-best probabilities only rank this text's spans against each other.")
    verdict = "above" if conf.in_text else "below"
    return (score + f" The probabilities share 1 among this text's spans, so they say which span, not whether the "
            f"text holds the answer; the margin says whether: it is {verdict} the threshold {cal['threshold']:.2f}, "
            f"chosen on {cal['n_questions']:,} SQuAD questions the head never trained on, each asked of its own "
            f"paragraph and of another article's (on another {cal['n_questions']:,}: ROC AUC {cal['auc_margin']:.3f}, "
            f"precision {cal['precision']:.3f}, recall {cal['recall']:.3f}).")


@_shown(None, EMPTY_NBEST, None, "", "", None, md=(3, 4))
def answer(model_text: str, question: str, context: str, request: gr.Request = None):
    name = serve.model_name(model_text)
    q = serve.check_text(question, "question")
    ctx = serve.check_text(context, "context")
    qa_model, ans = serve.answer(name, q, ctx, SERVE_DTYPE)
    if not ans.nbest:
        raise BertevalError("No answer span was found in the context (every candidate fell outside it).")
    best = ans.nbest[0]
    conf = serve.confidence_of(qa_model, ans)
    unlikely = conf is not None and conf.in_text is False
    entity = "best span, " + NOT_IN_TEXT if unlikely else "answer"
    whole = {"text": ctx, "entities": [{"entity": entity, "start": best.start_char, "end": best.end_char}]}
    shown, shift = serve.qa.excerpt(ctx, best.start_char, best.end_char)  # the answer in a window of its context
    highlighted = {"text": shown, "entities": [{"entity": entity, "start": best.start_char + shift,
                                                "end": best.end_char + shift}]}
    nbest = pd.DataFrame([[i + 1, c.text, round(c.probability, 4), round(c.score, 2), f"{c.start_char}–{c.end_char}",
                           c.window + 1] for i, c in enumerate(ans.nbest[:N_BEST_SHOWN])], columns=NBEST_COLUMNS)
    fig = qa_logits.start_end_logits(ans.tokens, ans.start_logits, ans.end_logits, best.start_token, best.end_token,
                                  sep_token=getattr(qa_model.tokenizer, "sep_token", None) or "[SEP]")
    windows = ("one window" if ans.n_windows == 1 else
               f"{ans.n_windows} overlapping windows (doc stride); the chart shows window {best.window + 1}, "
               f"where the best answer is")
    if unlikely:
        head = (f"**The answer is {NOT_IN_TEXT}.** The head's best span is “{best.text}”, but it scores the way "
                f"the best span of a text without the answer does (the score is just above the n-best list).")
    else:
        head = f"**Answer:** “{best.text}” (probability {best.probability:.2f} among the n-best, one entry per answer text)."
    about = f"{head} The context was read in {windows}.\n\n**Head:** {qa_model.source}"
    if qa_model.run_id:  # a committed head with its own dev figure: the published ones beside it
        about += f"\n\n{squad_scale()}"
    if shown != ctx:
        about += (f"\n\nThe answer is shown with {serve.qa.EXCERPT_AROUND} characters around it; the whole context "
                  f"is below.")
    return highlighted, nbest, fig, about, _confidence_line(conf), whole


# --- Next sentence ------------------------------------------------------------------------------------

def _nsp_accuracy(head) -> str:
    """A head's dev accuracy on the NSP pairs, in words (a probe: mean over its seeds)."""
    if head.dev_accuracy is None:
        return "not measured here"
    over = " (mean over seeds)" if head.weight is not None else ""
    return f"{head.dev_accuracy:.3f}{over} on {head.n_eval:,} dev pairs" if head.n_eval else f"{head.dev_accuracy:.3f}{over}"


def _nsp_table(answers) -> str:
    """Every encoder's answer to the same pair, side by side, with the vector its head reads."""
    rows = []
    for a in answers:
        if a.head is None:
            rows.append(f"| {a.name} | – | – | no head: {a.missing} | – | – |")
            continue
        p, record = a.prediction.p_is_next, f"`{a.head.run_id}`" if a.head.run_id else "–"
        accuracy = "not measured" if a.head.dev_accuracy is None else f"{a.head.dev_accuracy:.3f}"
        if a.head.baseline is not None and not a.head.baseline.beaten:
            accuracy += " (**at chance**)"
        rows.append(f"| {a.name} | {p:.3f} | {'IsNext' if p >= 0.5 else 'NotNext'} | {a.head.reads(brief=True)} | "
                    f"{accuracy} | {record} |")
    return ("**The same pair under every encoder** (the chosen one first; each answers with its own head):\n\n"
            "| encoder | P(IsNext) | verdict | what its head reads | dev accuracy | record |\n"
            "|---|---|---|---|---|---|\n" + "\n".join(rows) +
            f"\n\nDev accuracy: on the {_pairs_count(answers)}NSP dev pairs (sentences of SQuAD dev's Wikipedia "
            "paragraphs, seeded 50/50 IsNext / NotNext); a probe's is the mean over its seeds.")


def _pairs_count(answers) -> str:
    n = next((a.head.n_eval for a in answers if a.head is not None and a.head.n_eval), None)
    return f"{n:,} " if n else ""


@_shown(None, "", "", md=(1, 2))
def next_sentence(model_text: str, a: str, b: str, request: gr.Request = None):
    name = serve.model_name(model_text)
    first = serve.check_text(a, "sentence", name="sentence A")
    second = serve.check_text(b, "sentence", name="sentence B")
    answers = serve.next_sentence_everywhere(name, first, second)
    chosen = answers[0]
    if chosen.head is None:
        about = f"⚠️ **{chosen.name} cannot answer:** {chosen.missing} The other encoders' answers are below."
        return None, about, _nsp_table(answers)
    head, pred = chosen.head, chosen.prediction
    base = head.baseline
    at_chance = base is not None and not base.beaten
    worth = (f" **But this head is no better than {base.what}** ({base.value:.3f} of the dev pairs; one-sided exact "
             f"McNemar test on its record's {head.n_eval:,} dev predictions, p = {base.p_value:.2f}), so this "
             f"verdict says next to nothing about the pair." if at_chance else "")
    about = _notes(pred.reading) + (f"{'⚠️ ' if at_chance else ''}**P(IsNext) = {pred.p_is_next:.3f}** from "
                                    f"{chosen.name}, whose head reads {head.reads()}; dev accuracy "
                                    f"{_nsp_accuracy(head)}.{worth}")
    if head.weight is None:
        about += f" {head.model.model_id}'s pooler is {head.model.heads.pooler_provenance}."
    else:
        about += (f"\n\n{head.model.model_id} has no pretrained next-sentence head (transformers would attach a "
                  f"random one), so a probe trained on NSP pairs answers instead (record `{head.run_id}`).")
    suffix = " · at chance" if at_chance else ""
    label = {"IsNext" + suffix: pred.p_is_next, "NotNext" + suffix: 1.0 - pred.p_is_next}
    return label, about, _nsp_table(answers)


# --- Inside BERT --------------------------------------------------------------------------------------

def _inside_markdown(r) -> str:
    t, h = r.last_hidden_state_shape[1], r.last_hidden_state_shape[-1]
    lines = [_notes(r.reading) + f"**{r.model_id}**, {t} tokens: {markup.code_span(' '.join(r.tokens))}", "",
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


def _top(tokens: list[str], values: list[float]) -> str:
    i = max(range(len(values)), key=values.__getitem__)
    return f"{markup.code_span(tokens[i])} ({values[i]:.2f})"


def _heads_markdown(r) -> str:
    """The heads on top of the encoder, each with its weight shapes and what it makes of this input."""
    h = r.last_hidden_state_shape[-1]
    q, n, m = r.qa_head, r.nsp_head, r.mlm_head
    heads = {  # key: (the head, in words; its row's cells where the checkpoint has it, else None)
        "qa": ("span QA", q and [f"span QA, `Linear({h}, 2)`", "every token's final state: two logits per token "
                                 "(start, end)", f"W `{q.weight_shape}`, b `{q.bias_shape}`",
                                 f"highest start {_top(q.tokens, q.start_logits)}, highest end "
                                 f"{_top(q.tokens, q.end_logits)}; every token in the chart below"]),
        "nsp": ("next sentence", n and [f"next sentence, `Linear({h}, 2)`", "`pooler_output`: one vector per input",
                                        f"W `{n.weight_shape}`, b `{n.bias_shape}`",
                                        f"logits IsNext {n.logits[0]:.2f}, NotNext {n.logits[1]:.2f}: P(IsNext) "
                                        f"{n.p_is_next:.3f} (by hand from `pooler_output`: max abs difference "
                                        f"{n.by_hand_max_abs_diff:.1e})"]),
        "mlm": ("masked LM", m and ["masked LM (BERT's other pre-training head)",
                                    "every token's final state, through a transform",
                                    ", ".join(f"{k} `{v}`" for k, v in m.shapes.items()),
                                    f"top predictions for each `{m.mask_token}`: below" if m.predictions else
                                    f"type `{m.mask_token}` in the text to see what it predicts there"]),
    }
    lines = ["### The heads on top", "", "| head | reads | weights | on this input |", "|---|---|---|---|"]
    for key, (title, cells) in heads.items():
        cells = cells or [title, "–", "none", r.absent.get(key, "not shown")]
        lines.append("| " + " | ".join(cells) + " |")
    if r.mlm_head is not None and r.mlm_head.predictions:
        lines.append("")
        for pos, top in r.mlm_head.predictions:
            guesses = ", ".join(f"{markup.code_span(t)} {p:.3f}" for t, p in top)
            lines.append(f"- `{r.mlm_head.mask_token}` at token {pos}: {guesses}")
    if r.qa_head is not None or r.nsp_head is not None:
        lines.append("")
    if r.qa_head is not None:
        lines.append(f"The span head is the Answer tab's ({r.qa_head.source.split(':')[0].rstrip('.')}); here it reads "
                     f"the text alone as one segment, `[CLS] text [SEP]`, where a question would come first.")
    if r.nsp_head is not None:
        lines.append("The NSP head, too, reads the text as one segment here; the Next sentence tab asks it about two.")
    return "\n".join(lines)


@_shown("", "", None, md=(0, 1))
def look_inside(model_text: str, text: str, request: gr.Request = None):
    name = serve.model_name(model_text)
    r = serve.look_inside(name, serve.check_text(text, "sentence"))
    if r.qa_head is None:  # no QA head for this encoder (said in the table): no empty chart either
        return _inside_markdown(r), _heads_markdown(r), gr.update(value=None, visible=False)
    chart = qa_logits.start_end_logits(r.qa_head.tokens, r.qa_head.start_logits, r.qa_head.end_logits,
                                       sep_token=None, title="The span-QA head on this text: a start and an end "
                                                             "logit per token")
    return _inside_markdown(r), _heads_markdown(r), gr.update(value=chart, visible=True)


# --- Leaderboard --------------------------------------------------------------------------------------

# The figures, each on demand in its own accordion (built when opened, kept per filter), named in words.
FIGURES = {
    "ablation": "Pooling ablation: every pooling at the last layer, mean and 95% interval over seeds, rank bands",
    "models": "Models side by side: each model's score per pooling, with published numbers for context",
    "pooler_effect": "Does a trained pooler help? pooler minus cls, per model, paired by seed",
    "layers": "Which layer to read: cls and mean at each hidden layer",
    "every_layer": "Every layer: each pooling from the embeddings to the last layer",
    "learning_curves": "Learning curves: dev score against the number of training examples",
    "span_vector": "Span QA from one vector: the per-token head against heads reading one pooled vector",
    "heatmap": "Task × pooling for each model: every score in one grid",
    "significance": "Paired tests between heads: McNemar p-values for every pair",
}


def _filter(value):
    return None if value in (None, "", "all") else value


def _filters(model, task, pooling, regime) -> tuple:
    return _filter(model), _filter(task), _filter(pooling), _filter(regime)


def _csv_file(text: str) -> str:
    """The table as a CSV file for the download button; named by content, so a repeated view reuses it."""
    CSV_DIR.mkdir(parents=True, exist_ok=True)
    path = CSV_DIR / f"berteval-leaderboard-{hashlib.sha256(text.encode()).hexdigest()[:12]}.csv"
    if not path.exists():
        path.write_text(text, encoding="utf-8")
    return str(path)


def _count_line(table: pd.DataFrame, matched: int, search: str | None) -> str:
    """What the table shows, in words: its rows and the records behind them, and what a search left out (the
    search narrows the table only; the figures keep every record the filters match)."""
    rows = len(table)
    behind = int(table["n_seeds"].sum()) if rows else 0  # each row aggregates its seeds' records
    if not matched:
        return "No rows shown: no records match these filters."
    if search and behind < matched:
        found = (f"{rows} rows shown, those matching the search “{search}” ({behind} records)" if rows else
                 f"No rows shown: nothing matches the search “{search}”")
        return f"{found}; {matched} records match the filters, and the figures show all of them."
    return f"{rows} rows shown, one per setup: {matched} records match the filters, aggregated over seeds."


@_shown("", EMPTY_TABLE, None, "", "", md=(0, 3, 4))
def board(model, task, pooling, regime, search):
    """The first view (one compact view per task), the count line, the table and its CSV, and the k-fold
    estimates, for the filters: each computed once per records version (leaderboard.board)."""
    search = _check_search(search)
    b = leaderboard.board.current()
    f = _filters(model, task, pooling, regime)
    tab = b.table(*f, search=search or None)
    summary = _count_line(tab, len(b.rows(*f)), search)
    if b.problems:
        summary += "\n\nSkipped bad record lines: " + "; ".join(f"`{p}`" for p in b.problems[:5])
    first = b.first_view(f[0], f[1], f[3])  # compares heads: the pooling filter does not narrow it
    return (summary, _table_shown(tab), _csv_file(b.csv(*f, search=search or None)), first,
            _estimates_markdown(b.estimates(f[0], f[1], f[3])))


def _table_shown(tab: pd.DataFrame) -> pd.DataFrame:
    """The table as the page shows it: short model names, the interval in one column, numbers rounded."""
    from berteval.record_lookup import short_name

    digits = tab["mean"].abs().map(lambda m: 1 if m > 1 else 4)
    ci = [f"[{lo:.{d}f}, {hi:.{d}f}]" if pd.notna(lo) else "one seed" for lo, hi, d in
          zip(tab["ci95_low"], tab["ci95_high"], digits)]
    # "seeds" becomes their count (the seeds themselves are in the CSV)
    return tab.drop(columns=["seeds"]).assign(model=tab["model"].map(short_name), **{"95% CI": ci}).rename(
        columns={"main_metric": "metric", "n_seeds": "seeds", "n_train": "train", "n_eval": "eval"})[TABLE_SHOWN]


def _estimates_markdown(est) -> str:
    """The k-fold records the filters name, one table per task with that task's own metrics (SQuAD EM and F1,
    QNLI accuracy, ...), beside the table and never ranked in it (their heads trained on dev examples)."""
    return leaderboard.overview.estimates_markdown(est)


def _plot(b, name: str, f: tuple):
    """One figure for the filters, serialised once per records version and filter (PlotData skips Gradio's
    own to_json)."""
    from gradio.components.plot import PlotData

    return PlotData(type="plotly", plot=b.figure_json(name, *f))


def board_figures(model, task, pooling, regime, opened):
    """After a filter change: the open figures for the new filters; closed ones emptied (built when opened)."""
    b = leaderboard.board.current()
    f = _filters(model, task, pooling, regime)
    return tuple(_plot(b, name, f) if name in (opened or ()) else None for name in FIGURES)


def _figure_opened(name: str):
    def opened(model, task, pooling, regime, opened):
        """An accordion opened: its figure for the current filters, and the figure counted as open."""
        try:
            fig = _plot(leaderboard.board.current(), name, _filters(model, task, pooling, regime))
        except Exception:  # noqa: BLE001: a figure that fails says so; the tab keeps working
            log.exception("figure %s failed", name)
            fig = leaderboard.figures.message(FIGURES[name], "this figure could not be drawn (the server log has "
                                                             "the reason)")
        return fig, tuple(sorted({*(opened or ()), name}))
    return opened


def _figure_closed(name: str):
    def closed(opened):
        return tuple(n for n in (opened or ()) if n != name)
    return closed


def board_choices():
    choices = leaderboard.board.current().choices
    return tuple(gr.update(choices=["all", *choices[f]]) for f in ("model", "task", "pooling", "regime"))


def board_context(model, task, pooling, regime):
    """The findings in full (every head's margin, interval and test) and the published reference numbers, for
    the current filters; k-fold estimates never enter a finding."""
    try:
        b = leaderboard.board.current()
        f = _filters(model, task, pooling, regime)
        # A finding compares heads: the pooling filter does not narrow it.
        text = (b.findings(f[0], f[1], f[3]) + "\n\n### What NSP pre-training changes: the pairs of twins\n\n"
                + b.twins(f[1], f[3]))
        return markup.safe_markdown(text), b.references(f[1], f[3])
    except Exception:  # noqa: BLE001: the tab still shows everything else
        log.exception("findings failed")
        return "⚠️ Findings could not be written (the server log has the reason).", EMPTY_REFS


# A visitor's search and a link's parameters are untrusted and echoed back: bounded before anything reads them.
SEARCH_CHARS = 500
URL_VALUES = 16  # distinct values kept per query parameter (no filter has more choices)
URL_VALUE_CHARS = SEARCH_CHARS + 1  # one more than the search may hold: a longer one is noted, not cut


def _check_search(search: str | None) -> str | None:
    if search and len(search) > SEARCH_CHARS:
        raise BertevalError(f"The search has {len(search):,} characters; the limit is {SEARCH_CHARS}. Shorten it.")
    return search or None


def _bounded_query(query) -> dict[str, list[str]]:
    """A request's query as {key: its distinct values}: a key repeated 900 times counts once per value, at most
    URL_VALUES values per key, each cut to URL_VALUE_CHARS characters."""
    if not query:
        return {}
    out = {}
    for key in dict.fromkeys(query.keys()):
        values = query.getlist(key) if hasattr(query, "getlist") else query.get(key)
        values = [values] if isinstance(values, str) else [v for v in (values or []) if isinstance(v, str)]
        out[key] = list(dict.fromkeys(v[:URL_VALUE_CHARS] for v in values))[:URL_VALUES]
    return out


def board_from_url(request: gr.Request):
    """Page load: a link with leaderboard query parameters opens the tab on that view (filters set from the URL)."""
    query = _bounded_query(getattr(request, "query_params", None))
    choices = leaderboard.board.current().choices if query else None
    state = leaderboard.urlstate.from_query(query, choices or {})
    if len(state["search"]) > SEARCH_CHARS:
        state["search"], state["notes"] = "", [*state["notes"], f"the link's search is longer than {SEARCH_CHARS} "
                                                                f"characters: it is ignored"]
    if not state["shared"]:
        return (gr.skip(), *(gr.skip() for _ in leaderboard.urlstate.FILTERS), gr.skip(), False, "")
    drops = [gr.update(choices=["all", *choices[f]], value=state["filters"][f]) for f in leaderboard.urlstate.FILTERS]
    return (gr.Tabs(selected="leaderboard"), *drops, state["search"], True,
            markup.safe_markdown("\n\n".join(state["notes"])))


def board_shared(request: gr.Request):
    """Page load, in one round trip: a shared link's filters (board_from_url) and, for a link that names the
    leaderboard, its first view and table (its findings follow: board_context_if_shared). Two chained events took
    the table 3.5 s after the page opened (issue 42)."""
    opened = board_from_url(request)
    n = 6  # board's outputs: summary, table, CSV, first view, estimates, status
    if opened[-2] is not True:
        return (*opened, *(gr.skip() for _ in range(n)))
    f = [u.get("value", "all") if isinstance(u, dict) else "all" for u in opened[1:5]]  # as the link set them
    return (*opened, *board(*f, opened[5]))


def board_context_if_shared(shared, model, task, pooling, regime):
    """After a shared link's table: its findings and published numbers (a plain visit: nothing yet)."""
    if not shared:
        return gr.skip(), gr.skip()
    return board_context(model, task, pooling, regime)


def board_if_shared(shared, model, task, pooling, regime, search):
    """After page load: build the tab once for a shared link (its figures stay closed until opened); nothing for a
    plain visit."""
    n = 6 + 2  # board's outputs (summary, table, CSV, first view, estimates, status), then the findings and references
    if not shared:
        return tuple(gr.skip() for _ in range(n))
    return (*board(model, task, pooling, regime, search), *board_context(model, task, pooling, regime))


def disagree_heads(model, task, regime, seed):
    """The two head pickers: the heads of the run the filters name."""
    df = leaderboard.board.current().frame
    heads = leaderboard.disagreements.heads(df, _filter(task), _filter(model), _filter(regime), seed)
    return (gr.update(choices=heads, value=heads[0] if heads else None),
            gr.update(choices=heads, value=heads[1] if len(heads) > 1 else None))


def disagree(model, task, regime, seed, head_a, head_b):
    """The examples two heads of one run disagree on (the same code as `python -m berteval disagree`), with their
    texts where the data is found as the docs' commands find it ($BERTEVAL_DATA, else ../shared/data beside the
    clone, else the Hugging Face Hub, as on a Space); the messages speak to a visitor, never of command-line
    options."""
    if not all(v is None or isinstance(v, str) for v in (model, task, regime, seed, head_a, head_b)):
        return ("Pick one model, one task and one regime in the filters above, a seed, and two heads.",
                pd.DataFrame())  # an API caller's list or number: refused before anything reads it
    df = leaderboard.board.current().frame
    summary, table = leaderboard.disagreements.view(df, _filter(task), _filter(model), _filter(regime), seed, head_a,
                                                    head_b, data_dir=leaderboard.disagreements.texts_dir(), limit=25,
                                                    visitor=True, hub=True)
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
    button.click(fn, inputs, outputs, api_name=api_name, concurrency_id=api_name,
                 concurrency_limit=LANES[api_name])
    # An answer on the page belongs to the inputs shown: any change of an input (the encoder, the task, the
    # reading, the text, an example picked) empties the outputs and hides the message box. A server call that
    # loads nothing and skips the queue (Gradio 6.31's browser-only js events set no output values); it leaves
    # an answer given for exactly these inputs (`_answered`: the change that fired as the button took focus).
    gr.on([c.change for c in inputs], _clear_for(fn), inputs, outputs, queue=False, show_progress="hidden",
          api_visibility="private")


def _cleared(fn) -> tuple:
    """A tab's outputs emptied (the handler's own empty values, `_shown`) and its message box hidden."""
    return (*fn.empty, _status())


def _clear_for(fn):
    def clear(request: gr.Request, *values):
        if _answered(fn.__name__, request, values):
            return tuple(gr.skip() for _ in range(len(fn.empty) + 1))
        return _cleared(fn)
    return clear


def _classify_tab(model_box: gr.Dropdown) -> None:
    """Sentence (or pair) -> label or score, by the best committed head of the chosen task on the chosen vector."""
    _note("A sentence → positive / negative (SST-2), or a pair → paraphrase (MRPC), entailment (RTE) or a "
          "similarity score from 0 to 5 (STS-B), by the committed probe head reading the vector you choose, or on a "
          "pair task by a committed fine-tune reading it where that is better. A model with no SST-2 record gets a "
          "quick probe trained here on demand.")
    with gr.Row():
        with gr.Column():
            task = gr.Radio([(t.title, t.name) for t in serve.PAGE_TASKS.values()], value="sst2", label="Task",
                            elem_id="classify-task")
            sentence = gr.Textbox(label="Sentence", lines=2, elem_id="classify-sentence")
            sentence_b = gr.Textbox(label="Sentence B", lines=2, visible=False, elem_id="classify-sentence-b")
            pooling = gr.Radio(list(HEADS), value="mean", label="The head reads")
            go_classify = gr.Button("Classify", variant="primary")
        with gr.Column():
            label = gr.Label(label="Answer", num_top_classes=2, elem_id="classify-label")
            about = gr.Markdown(elem_id="classify-about")
            compare = gr.Markdown(elem_id="classify-compare")
    status = _status_box("classify")
    task.change(classify_inputs, task, [sentence, sentence_b], api_visibility="private")
    _wire("classify", go_classify, classify, [model_box, sentence, pooling, task, sentence_b],
          [label, about, compare, status], "classify")


def _answer_tab(model_box: gr.Dropdown) -> None:
    """Question + context -> span, n-best, the confidence that the text holds an answer, and the start/end logits."""
    _note("A question and a context → the answer span. The head scores every token twice (start and "
          "end); the chart shows both. " + QA_LIMITS)
    with gr.Row():
        with gr.Column():
            question = gr.Textbox(label="Question", max_lines=2, elem_id="qa-question")
            context = gr.Textbox(label="Context", lines=7, elem_id="qa-context")
            go_answer = gr.Button("Answer", variant="primary")
        with gr.Column():
            colours = {"answer": "#2ca02c", f"best span, {NOT_IN_TEXT}": "#bbbbbb"}
            highlighted = gr.HighlightedText(label="Answer in the context (the part around it)", color_map=colours,
                                             show_inline_category=False, elem_id="qa-highlight")
            qa_about = gr.Markdown(elem_id="qa-about")
            with gr.Accordion("The whole context, with the span marked", open=False, elem_id="qa-whole-box"):
                whole = gr.HighlightedText(show_label=False, color_map=colours, show_inline_category=False,
                                           elem_id="qa-whole")
    qa_status = _status_box("qa")
    qa_confidence = gr.Markdown(elem_id="qa-confidence")
    nbest = gr.Dataframe(EMPTY_NBEST, label="n-best answers", interactive=False, wrap=True, elem_id="qa-nbest",
                         column_widths=["7%", "45%", "13%", "15%", "12%", "8%"])
    qa_plot = gr.Plot(label="Start and end logits", elem_id="qa-logits")
    _wire("qa", go_answer, answer, [model_box, question, context],
          [highlighted, nbest, qa_plot, qa_about, qa_confidence, whole, qa_status], "answer")


def _nsp_tab(model_box: gr.Dropdown) -> None:
    """Sentence A + sentence B -> P(IsNext) from the chosen encoder's head, and every offline encoder's beside it."""
    _note("Sentence A and sentence B → does B follow A? BERT's pre-training asked exactly this, with a head on "
          "the pooler. An encoder without that head answers through a probe trained on NSP pairs; the table "
          "shows every offline encoder's answer, and which vector each head reads.")
    with gr.Row():
        with gr.Column():
            sent_a = gr.Textbox(label="Sentence A", lines=2, elem_id="nsp-a")
            sent_b = gr.Textbox(label="Sentence B", lines=2, elem_id="nsp-b")
            go_nsp = gr.Button("Does B follow A?", variant="primary")
        with gr.Column():
            nsp_label = gr.Label(label="Next sentence", num_top_classes=2, elem_id="nsp-label")
            nsp_about = gr.Markdown(elem_id="nsp-about")
    nsp_status = _status_box("nsp")
    nsp_all = gr.Markdown(elem_id="nsp-all")
    _wire("nsp", go_nsp, next_sentence, [model_box, sent_a, sent_b], [nsp_label, nsp_about, nsp_all, nsp_status],
          "next_sentence")


def _inside_tab(model_box: gr.Dropdown) -> None:
    """One input's hidden states, the pooler recomputed by hand, the distances between vectors, and the heads."""
    _note("What `last_hidden_state` and `pooler_output` are for one input, the pooler recomputed by "
          "hand, how far apart `cls`, `pooler` and `mean` are, and the heads on top: span QA (two logits per "
          "token), next sentence (two logits on the pooler) and, where the checkpoint has it, masked LM (type "
          "`[MASK]` in the text).")
    inside_text = gr.Textbox(label="Input", lines=2, elem_id="inside-text")
    go_inside = gr.Button("Look inside", variant="primary")
    inside_status = _status_box("inside")
    inside_report = gr.Markdown(elem_id="inside-report")
    inside_heads = gr.Markdown(elem_id="inside-heads")
    inside_plot = gr.Plot(label="The span-QA head's logits", elem_id="inside-qa-logits")
    _wire("inside", go_inside, look_inside, [model_box, inside_text],
          [inside_report, inside_heads, inside_plot, inside_status], "inside")


# The first view's tables in compact rows, so a task's (11 models x regimes for SST-2) fits one 900 px screen with
# the filters above it; every table wraps its cells within the page's width rather than scrolling sideways.
BOARD_CSS = """
#board-first table { font-size: 14px; width: 100%; }
#board-first th, #board-first td { padding: 3px 10px !important; }
#board-first h4 { margin: 8px 0 4px; }
#board-first p { margin: 2px 0 6px; }
#board-table table { table-layout: auto; }
"""


def _warm_board() -> None:
    """Compute the records' views once in the background at start-up, so the tab's first view is ready when a
    visitor opens it (a later run that adds records costs one recomputation, on the next visit)."""
    try:
        b = leaderboard.board.current()
        b.first_view(), b.table(), b.csv(), b.findings(), b.references()
        # then each task's view, the filter a visitor changes first: a view not seen before took 1.1-1.9 s
        # (issue 42), a computed one is a look-up
        for task in b.choices["task"]:
            b.first_view(task=task), b.csv(task=task), b.findings(task=task), b.twins(task=task)
            b.references(task=task), b.estimates(task=task), b.rows(task=task)
        for name in FIGURES:  # then each figure as an unfiltered visitor opens it first
            b.figure_json(name)
        for task in b.choices["task"]:  # and the first figure per task: a filter change redraws an open figure
            b.figure_json(next(iter(FIGURES)), task=task)
    except Exception:  # noqa: BLE001: the tab computes it again when opened, and says what fails
        log.exception("leaderboard warm-up failed")


def _leaderboard_tab(board_tab: gr.Tab) -> SimpleNamespace:
    """The filters, the first view (one row per task, or the chosen task's every-model view), the table, then every
    detail on demand: the findings in full, each figure, the disagreement viewer and the published numbers in
    accordions (a figure is built when its accordion opens). Returns the components the page's shared-link handler
    sets (filters, search, url_note) and fills."""
    import threading

    threading.Thread(target=_warm_board, name="board-warm-up", daemon=True).start()
    gr.HTML(f"<style>{BOARD_CSS}</style>", padding=False, elem_id="board-style")
    # Filters first (they were under 4,400 px of tables: issue 42), then the answer per task, then the table.
    with gr.Row(elem_id="board-filters"):
        filters = [gr.Dropdown(["all"], value="all", label=f, allow_custom_value=True, elem_id=f"board-{f}")
                   for f in ("model", "task", "pooling", "regime")]
        search = gr.Textbox(label="search the table (Enter)", placeholder="words that every row must contain",
                            max_lines=1, elem_id="board-search")
    _note("Every committed result record, aggregated over seeds. The filters apply to everything in this tab "
          "and live in the page's address: copy it to share this view.")
    board_status = _status_box("board")
    url_note = gr.Markdown(elem_id="board-url-note")
    first = gr.Markdown(elem_id="board-first")
    summary = gr.Markdown(elem_id="board-summary")
    table = gr.Dataframe(EMPTY_TABLE, label="Every row: mean ± std over seeds, rank band (heads in one band are not "
                         "separated by the paired tests), 95% interval; the CSV adds the reproduce command and record "
                         "ids", interactive=False, max_height=440, wrap=True, column_widths=TABLE_WIDTHS,
                         elem_id="board-table")
    with gr.Row():
        download = gr.DownloadButton("Download CSV (every column)", size="sm", scale=0, min_width=220,
                                     elem_id="board-csv")
    estimates = gr.Markdown(elem_id="board-estimates")
    with gr.Accordion("Findings in full: each head's margin over the others, its 95% interval over seeds and the "
                      "paired test; what NSP pre-training changes (the twins)", open=False, elem_id="board-findings-details"):
        findings_box = gr.Markdown(elem_id="board-findings")
    opened = gr.State(())  # the figures whose accordion is open: a filter change redraws those only
    plots = []
    for name, title in FIGURES.items():
        with gr.Accordion(title, open=False, elem_id=f"board-fig-{name}") as box:
            plots.append(gr.Plot(show_label=False, elem_id=f"board-plot-{name}"))
        box.expand(_figure_opened(name), [*filters, opened], [plots[-1], opened], api_visibility="private")
        box.collapse(_figure_closed(name), opened, opened, api_visibility="private")
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
    with gr.Accordion("Published numbers for context: other models, data and protocols, never ranked with the "
                      "measured rows", open=False, elem_id="board-refs"):
        refs = gr.Dataframe(EMPTY_REFS, interactive=False, wrap=True, elem_id="board-references")
    outputs = [summary, table, download, first, estimates, board_status]
    context = [findings_box, refs]
    inputs = [*filters, search]
    # User edits only (.input / Enter): the URL handler below sets the filters without re-running this.
    # The browser first writes the filters into the address bar (js), then the handler runs.
    for control in filters:
        control.input(board, inputs, outputs, js=leaderboard.urlstate.SYNC_JS, api_visibility="private")
        control.input(board_context, filters, context, api_visibility="private")
        control.input(board_figures, [*filters, opened], plots, api_visibility="private")
    search.submit(board, inputs, outputs, js=leaderboard.urlstate.SYNC_JS, api_visibility="private")
    # Built when the tab is opened, not on every page load; each view is computed once per records version
    # (leaderboard.board: a run that adds records makes a new one), so opening the tab again costs nothing.
    board_tab.select(board_choices, None, filters, api_visibility="private")
    # No progress veil: the views are cached, and a shared link's page load has filled them already (the veil dimmed
    # its first view while the tab's select re-sent it)
    board_tab.select(board, inputs, outputs, api_name="leaderboard", show_progress="hidden")
    board_tab.select(board_context, filters, context, api_visibility="private", show_progress="hidden")
    run_filters = [filters[0], filters[1], filters[3], seed]
    for control in (filters[0], filters[1], filters[3], seed):
        control.input(disagree_heads, run_filters, [head_a, head_b], api_visibility="private")
    board_tab.select(disagree_heads, run_filters, [head_a, head_b], api_visibility="private")
    go_disagree.click(disagree, [*run_filters, head_a, head_b], [disagree_summary, disagree_table],
                      api_name="disagree")
    return SimpleNamespace(filters=filters, search=search, url_note=url_note, inputs=inputs, outputs=outputs,
                           context=context)


def _model_info(offline: list[str]) -> str:
    """The Encoder box's help: what each offline encoder is (the twins once their checkpoints are committed)."""
    twins = [n for n in offline if n in PRETRAINED]
    pretrained = (f" {', '.join(twins)}: BERT-Minis pre-trained here from scratch on Wikipedia, with and without "
                  f"the next-sentence loss." if twins else "")
    return ("Offline: 'default' (the embedded all-MiniLM-L6-v2) and encoders derived from it (+nsp-pooler: its pooler "
            "trained by next-sentence prediction; +mlm-nsp: BERT's pre-training continued; +random: the untrained "
            f"floor).{pretrained} A hub id such as bert-base-uncased works where the hub is reachable (Classify then "
            "trains a quick probe for it); there the list also offers SQuAD checkpoints, whose own QA head answers in "
            "the Answer tab.")


def build_demo() -> gr.Blocks:
    with gr.Blocks(title="berteval: BERT's heads, tried by hand", analytics_enabled=False) as page:
        gr.Markdown(INTRO)
        model_box = gr.Dropdown(serve.suggested_models(), value=serve.DEFAULT_MODEL, label="Encoder",
                                allow_custom_value=True, filterable=True, elem_id="model",
                                info=_model_info(serve.offline_models()))
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
        page.load(board_shared, None, [tabs, *shown.filters, shown.search, shared, shown.url_note, *shown.outputs],
                  api_visibility="private", queue=False).then(
            board_context_if_shared, [shared, *shown.filters], shown.context, api_visibility="private",
            js=leaderboard.urlstate.SHOW_TAB_JS)
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


class _Launch(Mapping):
    """`launch`'s keyword arguments. Uploads: the page has no upload control, so `guard.NoUploads` refuses Gradio's
    upload route and `max_file_size` bounds it anyway. A Mapping, not a dict: Gradio adds its own entries to the
    `app_kwargs` it is given, so each `**LAUNCH` hands out a fresh one (the tests launch the page many times)."""

    _fixed = dict(ssr_mode=False, show_error=True, theme=THEME, css=CSS, footer_links=["api", "gradio"],
                  state_session_capacity=SESSIONS_KEPT, max_file_size="1kb")

    def __getitem__(self, key):
        if key == "app_kwargs":
            from starlette.middleware import Middleware

            return {"middleware": [Middleware(guard.NoUploads)]}
        return self._fixed[key]

    def __iter__(self):
        return iter([*self._fixed, "app_kwargs"])

    def __len__(self) -> int:
        return len(self._fixed) + 1


LAUNCH = _Launch()


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """--host and --port, defaulting to Gradio's own environment variables (a Space sets them)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", "7860")))
    return parser.parse_args(argv)


def port_problem(host: str, port: int) -> str | None:
    """Why the page cannot listen on host:port, as a line that says what to do; None when it can. Asked before
    the models load, so a busy port costs a second, not the warm-up; Gradio's own error names its environment
    variable, not this script's --port."""
    import errno
    import socket

    try:
        with socket.create_server((host, port)):  # SO_REUSEADDR: a just-stopped server's TIME_WAIT is no obstacle
            return None
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return f"port {port} on {host} is busy (another server, perhaps app.py already running): pass --port " \
                   f"with a free one, e.g. python app.py --port {port + 1}"
        return f"cannot listen on {host}:{port} ({exc.strerror or exc}): pass --host and --port that this machine has"


def main(argv: list[str] | None = None) -> None:
    args = options(argv)
    if problem := port_problem(args.host, args.port):
        raise SystemExit(f"error: {problem}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    torch.set_num_threads(TORCH_THREADS)
    from berteval import devices

    log.info("serving on %s", devices.use(None))  # BERTEVAL_DEVICE (auto: CUDA when present, else the CPU)
    for problem in serve.warm(serve.DEFAULT_MODEL):  # load once before the first visitor; say what is missing
        log.warning("not available yet: %s", problem)
    try:
        build_demo().launch(server_name=args.host, server_port=args.port, **LAUNCH)
    except OSError as exc:  # taken while the models loaded: Gradio's message names GRADIO_SERVER_PORT, not --port
        raise SystemExit(f"error: {port_problem(args.host, args.port) or exc}") from None


if __name__ == "__main__":
    sys.exit(main())
