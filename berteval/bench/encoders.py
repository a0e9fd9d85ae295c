"""Encoder speed: berteval's encoder path against its peers, in one process.

A user choosing a tool asks how fast it turns sentences into vectors, so the benchmark
runs, on the same model folder and the same inputs, berteval's own path
(`features.encode` for sentences, `qa.window_logits` for 384-token SQuAD windows; fp32
and bf16), transformers' `pipeline("feature-extraction")` and sentence-transformers'
`encode`, both at batch 32. The shared machine's load drifts, so the timed calls are
interleaved (each round runs every path once, after one untimed warm-up round) and the
median round is reported; ratios within one run are the figure to trust, not absolute
speeds. Achieved GFLOP/s (from the model config and the real token counts) is set
against a matmul peak measured in the same process, and pooled vectors are checked
against the peers' in fp32, like with like.
"""

from __future__ import annotations

import json
import platform
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from .. import features, models
from ..errors import BertevalError
from ..qa import DEFAULTS as QA_DEFAULTS
from ..qa import inference as qa
from ..qa.windows import Windows, make_windows

from . import PEER_BATCH  # the CLI default, defined where the parser reads it without torch
SENTENCE_MAX_LENGTH = 128  # what `berteval run` uses for sentences
QA_WINDOW = QA_DEFAULTS.max_length
PARITY_TOL = 1e-4

# Used only when no data folder is given: the benchmark is about speed, so a short sample
# beats failing offline (say so in the output).
FALLBACK_SENTENCES = (
    "a quiet, patient film that earns every one of its small surprises .",
    "the plot collapses long before the final reel .",
    "an uneven but often very funny comedy .",
    "nothing here is new , and the actors seem to know it .",
    "a warm , generous portrait of a family that argues the way real families do .",
    "tedious .",
    "the score is lovely ; the script is not .",
    "it is the rare sequel that improves on the original in every way that matters .",
)
FALLBACK_QA = (
    ("What does the pooler read?",
     "The pooler of a BERT encoder reads the hidden state of the first token, applies a dense layer and a "
     "tanh, and passes the result to the next-sentence head during pre-training. " * 12),
    ("Why does span QA read every token?",
     "An answer is a span of the context, so the question-answering head scores every token as a possible "
     "start and as a possible end of the answer, and decoding picks the best pair. " * 12),
)


@dataclass
class Timing:
    section: str  # "sentences" or "qa windows"
    path: str  # what ran, e.g. "berteval" or "transformers pipeline"
    dtype: str
    n_items: int
    n_tokens: int  # real (unpadded) tokens the path's own tokeniser produced
    gflop: float  # useful work: FLOPs over the real tokens (see encoder_flops)
    times_s: list[float] = field(default_factory=list)

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s)

    @property
    def per_s(self) -> float:
        return self.n_items / self.median_s

    @property
    def gflops(self) -> float:
        return self.gflop / self.median_s


@dataclass
class BenchReport:
    model: str
    machine: str
    threads: int
    repeats: int
    sentences_source: str
    qa_source: str
    peak_gflops: dict[str, float]  # dtype -> best measured matmul GFLOP/s
    timings: list[Timing]
    parity: dict[str, float]  # check name -> max |difference|
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        out = asdict(self)
        for t, d in zip(self.timings, out["timings"]):
            d.update(median_s=t.median_s, per_s=t.per_s, gflops=t.gflops)
        return out


def encoder_flops(config, lengths) -> float:
    """Forward FLOPs of a BERT-style encoder over sequences of these lengths (a multiply-add is 2).

    Per layer and token: the Q, K, V and attention-output projections (4 H^2 multiply-adds)
    and the feed-forward pair (2 H I); per layer and sequence of T tokens: scores Q K^T and
    the weighted sum of V (T^2 H multiply-adds each). Embeddings, layer norms, softmax,
    GELU, pooling and small heads are left out (under 1% here).
    """
    h, i, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    t = np.asarray(lengths, dtype=np.float64)
    dense = 2.0 * (4 * h * h + 2 * h * i) * t.sum()
    attention = 2.0 * 2 * h * (t**2).sum()
    return float(layers * (dense + attention))


def matmul_peak(dtype: torch.dtype, repeats: int = 5) -> float:
    """Best GFLOP/s of a square matmul and of the model's feed-forward shape, median of repeats."""
    best = 0.0
    for m, k, n in ((2048, 2048, 2048), (4096, 384, 1536)):
        a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
        a @ b  # warm-up: the first call picks kernels
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(3):
                a @ b
            times.append((time.perf_counter() - t0) / 3)
        best = max(best, 2.0 * m * k * n / statistics.median(times) / 1e9)
    return best


def machine() -> str:
    """The CPU, threads and the instruction sets that decide bf16 speed (AVX512-BF16, AMX)."""
    from ..provenance import device

    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")).split()
        isa = ", ".join(f"{f} {'yes' if f in flags else 'no'}" for f in ("avx512f", "avx512_bf16", "amx_bf16"))
    except (OSError, StopIteration):
        isa = "instruction sets unknown"
    return f"{device()} ({isa}), torch {torch.__version__}, {platform.python_implementation()} {platform.python_version()}"


def load_sentences(data_dir: Path | None, limit: int | None) -> tuple[list[str], str]:
    if data_dir is None:
        return list(FALLBACK_SENTENCES), "built-in sample (no --data-dir or BERTEVAL_DATA)"
    from ..tasks import sst2

    texts = sst2.load(data_dir).eval.texts
    return texts[:limit] if limit else texts, f"SST-2 dev from {data_dir}"


def load_questions(data_dir: Path | None) -> tuple[list[tuple[str, str]], str]:
    if data_dir is None or not (Path(data_dir) / "squad" / "dev-v1.1.json").is_file():
        return list(FALLBACK_QA), "built-in sample (no squad/dev-v1.1.json under the data folder)"
    from ..tasks import squad

    return list(squad.load(data_dir).eval.texts), f"SQuAD v1.1 dev from {data_dir}"


def _stride(max_length: int) -> int:
    return min(QA_DEFAULTS.doc_stride, max_length // 3)  # 128 (the run default) for 384-token windows; tiny test windows need less


def qa_windows(tokenizer, questions: list[tuple[str, str]], n_windows: int, max_length: int) -> Windows:
    """n full windows (max_length tokens each), cut as `berteval run --task squad` cuts them.

    Full windows make the figure the cost of a 384-token window, as named, whatever the mix
    of context lengths; should the questions hold too few, shorter ones fill the rest in order.
    """
    full, short = [], []
    for ex, (q, c) in enumerate(questions):  # one question at a time: stop as soon as there are enough
        w = make_windows(tokenizer, [q], [c], max_length=max_length, doc_stride=_stride(max_length))
        for feats, offs in zip(w.features, w.offsets):
            (full if len(feats["input_ids"]) == max_length else short).append((ex, feats, offs))
        if len(full) >= n_windows:
            break
    picked = (full + short)[:n_windows]
    return Windows(np.array([p[0] for p in picked], dtype=np.int64), [p[1] for p in picked], [p[2] for p in picked])


def window_texts(tokenizer, windows: Windows, questions: list[tuple[str, str]]) -> list[str]:
    """Each window as one string for peers that take text only: question [SEP] the window's context.

    The tokeniser reads "[SEP]" as the special token, so a peer runs the same number of
    tokens (within a word piece at a cut) through the same encoder; token types differ,
    the work does not.
    """
    sep = tokenizer.sep_token or "[SEP]"
    out = []
    for ex, offs in zip(windows.example_index.tolist(), windows.offsets):
        spans = [o for o in offs if o is not None]
        question, context = questions[ex]
        out.append(f"{question} {sep} {context[spans[0][0]:spans[-1][1]]}" if spans else question)
    return out


def _mean_rows(states: list[torch.Tensor], lengths: list[int]) -> np.ndarray:
    """Mean over each row's real tokens; a batched pipeline returns rows padded to their batch."""
    return torch.stack([s[0, :n].float().mean(0) for s, n in zip(states, lengths)]).numpy()


def _pipeline(loaded: models.LoadedModel):
    from transformers import pipeline

    return pipeline("feature-extraction", model=loaded.encoder, tokenizer=loaded.tokenizer, device="cpu")


def _sentence_transformer(loaded: models.LoadedModel, max_length: int):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules.normalize import Normalize

    with models.quiet_loader():
        st = SentenceTransformer(loaded.path, device="cpu")
    st.max_seq_length = max_length  # the same truncation as berteval's path
    normalises = any(isinstance(m, Normalize) for m in st)
    return st, normalises


def _peer_calls(loaded, texts: list[str], lengths: list[int], batch_size: int, max_length: int):
    """The two peers on the same texts, {(path, dtype): call -> pooled vectors}, and whether
    sentence-transformers normalises its output (this model's modules.json says it does)."""
    pipe = _pipeline(loaded)
    st, normalises = _sentence_transformer(loaded, max_length)
    tok_kw = {"truncation": True, "max_length": max_length}
    return {
        ("transformers pipeline", "fp32"): lambda: _mean_rows(
            pipe(texts, batch_size=batch_size, return_tensors=True, tokenize_kwargs=tok_kw), lengths),
        ("sentence-transformers", "fp32"): lambda: st.encode(texts, batch_size=batch_size, convert_to_numpy=True,
                                                             show_progress_bar=False),
    }, normalises


def _time_rounds(timings: list[Timing], calls: list[Callable[[], object]], repeats: int) -> list[object]:
    """One untimed warm-up round, then `repeats` rounds of every call in turn; last outputs returned."""
    outputs: list[object] = [None] * len(calls)
    for r in range(repeats + 1):
        for k, call in enumerate(calls):
            t0 = time.perf_counter()
            outputs[k] = call()
            if r:
                timings[k].times_s.append(time.perf_counter() - t0)
    return outputs


def bench_sentences(loaded, texts: list[str], repeats: int, batch_size: int, report_notes: list[str]):
    """Timings and fp32 parity for sentences -> one mean-pooled vector each."""
    cfg = loaded.encoder.config
    lengths = [len(ids) for ids in loaded.tokenizer(texts, truncation=True, max_length=SENTENCE_MAX_LENGTH)["input_ids"]]
    gflop = encoder_flops(cfg, lengths) / 1e9
    peers, normalises = _peer_calls(loaded, texts, lengths, batch_size, SENTENCE_MAX_LENGTH)

    def ours(dtype):
        return lambda: features.encode(loaded, texts, data_sha256="bench", poolings=["mean"],
                                       max_length=SENTENCE_MAX_LENGTH, dtype=dtype, use_cache=False,
                                       progress=False).vectors[("mean", -1)]

    calls = {
        ("berteval", "fp32"): ours("fp32"),
        ("berteval", "bf16"): ours("bf16"),
        **peers,
    }
    timings = [Timing("sentences", p, d, len(texts), sum(lengths), gflop) for p, d in calls]
    out = dict(zip(calls, _time_rounds(timings, list(calls.values()), repeats)))

    ours32, ours16 = out[("berteval", "fp32")], out[("berteval", "bf16")]
    unit = ours32 / np.linalg.norm(ours32, axis=1, keepdims=True)
    parity = {
        "sentences fp32: berteval mean vs pipeline mean": float(np.abs(ours32 - out[("transformers pipeline", "fp32")]).max()),
        f"sentences fp32: berteval mean{', L2-normalised,' if normalises else ''} vs sentence-transformers":
            float(np.abs((unit if normalises else ours32) - out[("sentence-transformers", "fp32")]).max()),
        "sentences bf16 vs fp32 (berteval mean)": float(np.abs(ours16 - ours32).max()),
    }
    cos = (ours16 * ours32).sum(1) / (np.linalg.norm(ours16, axis=1) * np.linalg.norm(ours32, axis=1))
    report_notes.append(f"bf16 vs fp32 mean vectors: lowest cosine {cos.min():.6f} over {len(texts)} sentences")
    return timings, parity


def bench_windows(loaded, questions, n_windows: int, max_length: int, repeats: int, batch_size: int):
    """Timings for QA windows: berteval's span model vs the peers encoding the same windows."""
    cfg = loaded.encoder.config
    windows = qa_windows(loaded.tokenizer, questions, n_windows, max_length)
    texts = window_texts(loaded.tokenizer, windows, questions)
    ours_len = [len(f["input_ids"]) for f in windows.features]
    peer_len = [len(ids) for ids in loaded.tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]]
    span_model = qa.head_model(loaded)  # the head's weights do not matter for speed
    peers, _ = _peer_calls(loaded, texts, peer_len, batch_size, max_length)
    calls = {
        ("berteval", "fp32"): lambda: qa.window_logits(span_model, loaded.tokenizer, windows, dtype="fp32"),
        ("berteval", "bf16"): lambda: qa.window_logits(span_model, loaded.tokenizer, windows, dtype="bf16"),
        **peers,
    }
    timings = [
        Timing("qa windows", p, d, len(windows), sum(lens), encoder_flops(cfg, lens) / 1e9)
        for (p, d), lens in zip(calls, (ours_len, ours_len, peer_len, peer_len))
    ]
    _time_rounds(timings, list(calls.values()), repeats)
    return timings


def run_bench(model: str = models.DEFAULT, data_dir: Path | None = None, sentences: int | None = None,
              windows: int = 64, window_length: int = QA_WINDOW, repeats: int = 5,
              batch_size: int = PEER_BATCH, threads: int | None = None, log=print) -> BenchReport:
    if repeats < 1:
        raise BertevalError("--repeats must be at least 1")
    if threads:
        torch.set_num_threads(threads)
    loaded = models.load(model)
    texts, sent_source = load_sentences(data_dir, sentences)
    questions, qa_source = load_questions(data_dir) if windows else ([], "skipped (--windows 0)")
    notes: list[str] = []
    log(f"matmul peak ({torch.get_num_threads()} threads) ...")
    peak = {"fp32": matmul_peak(torch.float32, repeats), "bf16": matmul_peak(torch.bfloat16, repeats)}
    log(f"sentences: {len(texts)} x {repeats + 1} rounds ...")
    timings, parity = bench_sentences(loaded, texts, repeats, batch_size, notes)
    if windows:
        log(f"QA windows: {windows} x {repeats + 1} rounds ...")
        timings += bench_windows(loaded, questions, windows, window_length, repeats, batch_size)
    return BenchReport(model=loaded.model_id, machine=machine(), threads=torch.get_num_threads(), repeats=repeats,
                       sentences_source=sent_source, qa_source=qa_source, peak_gflops=peak, timings=timings,
                       parity=parity, notes=notes)


def format_report(rep: BenchReport) -> str:
    lines = [f"model {rep.model}; {rep.machine}",
             f"sentences: {rep.sentences_source}; QA windows: {rep.qa_source}",
             f"median of {rep.repeats} interleaved rounds after a warm-up round; peers at batch {PEER_BATCH}",
             "matmul peak: " + ", ".join(f"{d} {g:,.0f} GFLOP/s" for d, g in rep.peak_gflops.items()),
             ""]
    header = (f"{'section':<11} {'path':<22} {'dtype':<5} {'items/s':>9} {'min-max s':>13} {'tok/item':>8} "
              f"{'GFLOP/s':>8} {'% peak':>6} {'bert fp32 /':>11} {'bert bf16 /':>11}")
    lines += [header, "-" * len(header)]
    for section in dict.fromkeys(t.section for t in rep.timings):
        rows = [t for t in rep.timings if t.section == section]
        base = {t.dtype: t.per_s for t in rows if t.path == "berteval"}
        for t in rows:
            ratio = lambda d: f"{base[d] / t.per_s:.2f}x" if d in base else "-"  # noqa: E731
            lines.append(f"{section:<11} {t.path:<22} {t.dtype:<5} {t.per_s:>9,.1f} "
                         f"{min(t.times_s):>6.2f}-{max(t.times_s):<6.2f} {t.n_tokens / t.n_items:>8.1f} "
                         f"{t.gflops:>8,.1f} {100 * t.gflops / rep.peak_gflops[t.dtype]:>5.0f}% "
                         f"{ratio('fp32'):>11} {ratio('bf16'):>11}")
    lines += ["", "'bert fp32 /' and 'bert bf16 /': berteval's items/s in that dtype divided by this row's.",
              "GFLOP/s: encoder FLOPs over the real (unpadded) tokens / median time; see bench.encoder_flops.", ""]
    for name, diff in rep.parity.items():
        verdict = "" if "bf16" in name else (" ok" if diff <= PARITY_TOL else f" ABOVE {PARITY_TOL:g}")
        lines.append(f"parity, {name}: max |diff| {diff:.2e}{verdict}")
    lines += [f"note: {n}" for n in rep.notes]
    return "\n".join(lines)


def write_json(rep: BenchReport, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rep.to_json(), indent=1))
