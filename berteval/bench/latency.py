"""Where a demo answer's time goes, in the process: the forward passes at batch 1, and the served calls.

The page answers one visitor at a time on `threads` torch threads (app.py's BERTEVAL_APP_THREADS, 1 by default).
This times, p50 of `n` calls after two warm-ups: the Classify tab's encoder pass over one sentence and the Answer
tab's QA pass over the window of a 1,000-character context, each in fp32 and on bf16 weights, at 1 and 2
threads; then `serve.classify` and `serve.answer` whole (tokenising, the pass, the heads or decoding) for a
model the page can serve. What Gradio adds on top (queue, events, HTTP) is measured at the server by
`tests/tools/app_latency.py`. Torch-free at import time: the client tool borrows the inputs.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

SENTENCES = ["A gorgeous, witty, seductive movie.", "The plot is a mess and the acting is even worse.",
             "It's not a bad film, just a forgettable one.", "An absorbing and unsettling psychological drama."]
QUESTION = "In what country is Normandy located?"
PARAGRAPH = ("The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, a region in "
             "France. They were descended from Norse raiders and pirates from Denmark, Iceland and Norway who, under "
             "their leader Rollo, agreed to swear fealty to King Charles III of West Francia.")
CONTEXT_CHARS = 1000


def context(chars: int = CONTEXT_CHARS) -> str:
    """The paragraph repeated and cut to `chars` characters (a window of ~220 tokens at 1,000)."""
    return " ".join([PARAGRAPH] * (chars // len(PARAGRAPH) + 1))[:chars]


@dataclass
class Latency:
    what: str
    threads: int
    p50_ms: float
    n: int


def p50_ms(fn, n: int = 30) -> float:
    fn(), fn()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(times), 2)


def forwards(encoder, qa_model, tokenizer, threads=(1, 2), n: int = 30) -> list[Latency]:
    """Batch-1 forward passes: one sentence through the encoder, one 1,000-character window through the QA model."""
    import torch

    from .. import precision
    from ..qa import DEFAULTS
    from ..qa.windows import make_windows

    sentence = dict(tokenizer([SENTENCES[1]], return_tensors="pt"))
    # the served window; a small test model's positions can end sooner
    length = min(DEFAULTS.max_length, qa_model.config.max_position_embeddings)
    windows = make_windows(tokenizer, [QUESTION], [context()], max_length=length,
                           doc_stride=min(DEFAULTS.doc_stride, length // 3))
    window = tokenizer.pad([windows.features[0]], return_tensors="pt")
    tokens = window["input_ids"].shape[1]
    before, rows = torch.get_num_threads(), []
    try:
        for k in threads:
            torch.set_num_threads(k)
            with torch.inference_mode():
                for label, module, batch in ((f"classify forward ({sentence['input_ids'].shape[1]} tokens)", encoder,
                                              sentence), (f"QA forward ({tokens} tokens)", qa_model, window)):
                    rows.append(Latency(f"{label}, fp32", k, p50_ms(lambda: module(**batch), n), n))
                    rows.append(Latency(f"{label}, bf16 weights", k,
                                        p50_ms(lambda: precision.bf16_copy(module)(**batch), n), n))
    finally:
        torch.set_num_threads(before)
    return rows


def measure(model: str, threads=(1, 2), serve_threads: int = 1, n: int = 30, log=print) -> tuple[list[Latency], list[str]]:
    """Forward rows for any model; the served calls where the page can serve `model` (else a note says why not)."""
    import torch

    from .. import models, serve
    from ..errors import BertevalError
    from ..qa.inference import head_model

    loaded = models.load(model)
    notes = []
    try:
        qa = serve.qa_model(model)
        qa_module, served = qa.model, True
    except BertevalError as exc:
        qa_module, served = head_model(loaded), False
        notes.append(f"serve rows left out: the page cannot serve {model!r} ({exc})")
    log("latency: batch-1 forward passes ...")
    rows = forwards(loaded.encoder, qa_module, loaded.tokenizer, threads, n)
    if served:
        log("latency: served calls ...")
        before = torch.get_num_threads()
        torch.set_num_threads(serve_threads)
        try:
            ctx, heads = context(), serve.classifier(model).heads
            for dtype in ("fp32", "bf16"):  # the page's default, and BERTEVAL_APP_DTYPE=bf16
                weights = "fp32" if dtype == "fp32" else "bf16 weights"
                rows.append(Latency(f"serve.classify (every committed head), {weights}", serve_threads,
                                    p50_ms(lambda: serve.classify(model, SENTENCES[1], heads, dtype), n), n))
                rows.append(Latency(f"serve.answer ({len(ctx):,}-character context), {weights}", serve_threads,
                                    p50_ms(lambda: serve.answer(model, QUESTION, ctx, dtype), n), n))
        finally:
            torch.set_num_threads(before)
    return rows, notes


def format_latency(rows: list[Latency], notes: list[str]) -> str:
    width = max(len(r.what) for r in rows)
    lines = [f"{'batch 1, in the process':<{width}} {'threads':>7} {'p50 ms':>8}"]
    lines += [f"{r.what:<{width}} {r.threads:>7} {r.p50_ms:>8.2f}" for r in rows]
    lines.append(f"p50 of {rows[0].n} calls after two warm-ups; the page serves on 1 thread (BERTEVAL_APP_THREADS), "
                 "fp32 unless BERTEVAL_APP_DTYPE=bf16; Gradio's own cost is measured at the server by "
                 "tests/tools/app_latency.py")
    return "\n".join(lines + [f"note: {n}" for n in notes])
