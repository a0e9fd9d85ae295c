"""Encoder speed: berteval's encoder path against its peers, in one process.

A user choosing a tool asks how fast it turns sentences into vectors, so the benchmark
runs, on the same model folder and the same inputs, berteval's own path
(`features.encode` for sentences, `qa.window_logits` for 384-token SQuAD windows; fp32,
bf16 on a bf16 copy of the weights, the path frozen inference takes, and bf16 autocast, the
path training takes: see `berteval.precision`), transformers' `pipeline("feature-extraction")`
and sentence-transformers' `encode`, both at batch 32. The shared machine's load drifts, so the timed calls are
interleaved (each round runs every path once, after one untimed warm-up round) and the
median round is reported; ratios within one run are the figure to trust, not absolute
speeds. Achieved GFLOP/s (from the model config and the real token counts) is set
against a matmul peak measured in the same process, and pooled vectors are checked
against the peers' in fp32, like with like; each bf16 path is checked against berteval's
fp32 on the same inputs (vectors: lowest cosine; windows: logits and the best start and end).
"""

from __future__ import annotations

import platform
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from .. import features, models, precision
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


BERTEVAL = "berteval"
FP32, BF16_WEIGHTS, BF16_AUTOCAST = precision.PATHS  # the path labels: "fp32", "bf16 (weights)", "bf16 (autocast)"


@dataclass
class Timing:
    section: str  # "sentences" or "qa windows"
    path: str  # what ran, e.g. "berteval" or "transformers pipeline"
    dtype: str  # a key of precision.PATHS: "fp32", "bf16 (weights)", "bf16 (autocast)"
    n_items: int
    n_tokens: int  # real (unpadded) tokens the path's own tokeniser produced
    gflop: float  # useful work: FLOPs over the real tokens (see encoder_flops)
    times_s: list[float] = field(default_factory=list)
    max_tokens: int | None = None  # berteval's token budget per batch, where the row tries a non-default one

    @property
    def label(self) -> str:
        budget = f", {self.max_tokens:,}-token batches" if self.max_tokens else ""
        return f"{self.path} {self.dtype}{budget}"

    @property
    def peak_dtype(self) -> str:
        return precision.PATHS[self.dtype][0]

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
    parity: dict[str, float]  # fp32 check name -> max |difference| (berteval vs the peers)
    bf16: dict[str, dict[str, float]] = field(default_factory=dict)  # "section, path" -> its figures vs berteval fp32
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
    """Best GFLOP/s of a square matmul and of the model's feed-forward shape, each at its fastest repeat: a peak
    is what the chip can do, and a shared machine's slow repeats say nothing about that (on an AMX machine the
    median of five was half the best)."""
    from .. import precision

    shapes = ((2048, 2048, 2048), (4096, 384, 1536))
    if dtype == torch.bfloat16 and not precision.cpu_native_bf16():
        # Emulated bf16 (an AVX2-only CPU) ran one 1024^3 matmul in 4.5 s against fp32's 0.07: at 2048^3 the peak
        # alone took minutes. Its rate barely depends on the size, so it is measured on shapes a quarter the size.
        shapes = ((512, 512, 512), (1024, 384, 384))
    best = 0.0
    for m, k, n in shapes:
        a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
        a @ b  # warm-up: the first call picks kernels
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(3):
                a @ b
            times.append((time.perf_counter() - t0) / 3)
        best = max(best, 2.0 * m * k * n / min(times) / 1e9)
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
    """The peers on the same texts, {(path, dtype): call -> pooled vectors}, whether sentence-transformers
    normalises its output (this model's modules.json says it does), and notes. A peer that cannot be imported
    here (sentence-transformers needs `datasets`, which a borrowed machine may lack) is left out and named."""
    pipe = _pipeline(loaded)
    tok_kw = {"truncation": True, "max_length": max_length}
    calls = {("transformers pipeline", "fp32"): lambda: _mean_rows(
        pipe(texts, batch_size=batch_size, return_tensors=True, tokenize_kwargs=tok_kw), lengths)}
    try:
        st, normalises = _sentence_transformer(loaded, max_length)
    except ImportError as exc:
        return calls, False, [f"sentence-transformers left out: it does not import here ({exc})"]
    calls[("sentence-transformers", "fp32")] = lambda: st.encode(texts, batch_size=batch_size, convert_to_numpy=True,
                                                                 show_progress_bar=False)
    return calls, normalises, []


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


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def bench_sentences(loaded, texts: list[str], repeats: int, batch_size: int, bf16_budgets=()):
    """Timings, fp32 parity with the peers, and each bf16 path against fp32, for sentences -> one mean-pooled
    vector each. `bf16_budgets`: more bf16 (weights) rows at these token budgets (tuning features.MAX_TOKENS)."""
    cfg = loaded.encoder.config
    lengths = [len(ids) for ids in loaded.tokenizer(texts, truncation=True, max_length=SENTENCE_MAX_LENGTH)["input_ids"]]
    gflop = encoder_flops(cfg, lengths) / 1e9
    peers, normalises, notes = _peer_calls(loaded, texts, lengths, batch_size, SENTENCE_MAX_LENGTH)

    def ours(label, max_tokens=None):
        dtype, how = precision.PATHS[label]
        return lambda: features.encode(loaded, texts, data_sha256="bench", poolings=["mean"],
                                       max_length=SENTENCE_MAX_LENGTH, dtype=dtype, max_tokens=max_tokens,
                                       use_cache=False, progress=False, how=how).vectors[("mean", -1)]

    calls = {(BERTEVAL, label, None): ours(label) for label in precision.PATHS}
    calls.update({(BERTEVAL, BF16_WEIGHTS, b): ours(BF16_WEIGHTS, b) for b in bf16_budgets
                  if b != features.MAX_TOKENS["bf16"]})
    calls.update({(path, FP32, None): call for (path, _), call in peers.items()})
    timings = [Timing("sentences", p, d, len(texts), sum(lengths), gflop, max_tokens=b) for p, d, b in calls]
    out = dict(zip(calls, _time_rounds(timings, list(calls.values()), repeats)))

    ours32 = out[(BERTEVAL, FP32, None)]
    unit = ours32 / np.linalg.norm(ours32, axis=1, keepdims=True)
    parity = {"sentences fp32: berteval mean vs pipeline mean":
              float(np.abs(ours32 - out[("transformers pipeline", FP32, None)]).max())}
    if ("sentence-transformers", FP32, None) in out:
        parity[f"sentences fp32: berteval mean{', L2-normalised,' if normalises else ''} vs sentence-transformers"] = \
            float(np.abs((unit if normalises else ours32) - out[("sentence-transformers", FP32, None)]).max())
    bf16 = {f"sentences, {label}": {"lowest_cosine": float(_cosines(out[(BERTEVAL, label, None)], ours32).min()),
                                    "max_abs_diff": float(np.abs(out[(BERTEVAL, label, None)] - ours32).max())}
            for label in (BF16_WEIGHTS, BF16_AUTOCAST)}
    return timings, parity, bf16, notes


def bench_windows(loaded, questions, n_windows: int, max_length: int, repeats: int, batch_size: int):
    """Timings for QA windows (berteval's span model in each path vs the peers encoding the same windows), and
    each bf16 path's logits against fp32's."""
    cfg = loaded.encoder.config
    windows = qa_windows(loaded.tokenizer, questions, n_windows, max_length)
    texts = window_texts(loaded.tokenizer, windows, questions)
    ours_len = [len(f["input_ids"]) for f in windows.features]
    peer_len = [len(ids) for ids in loaded.tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]]
    span_model = qa.head_model(loaded)  # the head's weights do not matter for speed
    peers, _, _ = _peer_calls(loaded, texts, peer_len, batch_size, max_length)

    def ours(label):
        dtype, how = precision.PATHS[label]
        return lambda: qa.window_logits(span_model, loaded.tokenizer, windows, dtype=dtype, how=how)

    calls = {**{(BERTEVAL, label): ours(label) for label in precision.PATHS},
             **{(path, FP32): call for (path, _), call in peers.items()}}
    timings = [Timing("qa windows", p, d, len(windows), sum(lens), encoder_flops(cfg, lens) / 1e9)
               for (p, d), lens in zip(calls, [ours_len] * len(precision.PATHS) + [peer_len] * len(peers))]
    out = dict(zip(calls, _time_rounds(timings, list(calls.values()), repeats)))
    s32, e32 = out[(BERTEVAL, FP32)]
    bf16 = {}
    for label in (BF16_WEIGHTS, BF16_AUTOCAST):
        s16, e16 = out[(BERTEVAL, label)]
        bf16[f"qa windows, {label}"] = {
            "max_abs_logit_diff": float(max(np.abs(a - b).max() for a, b in zip(s16 + e16, s32 + e32))),
            "same_best_start_and_end": sum(int(a.argmax() == b.argmax() and c.argmax() == d.argmax())
                                           for a, b, c, d in zip(s16, s32, e16, e32)),
            "windows": len(windows)}
    return timings, bf16


def run_bench(model: str = models.DEFAULT, data_dir: Path | None = None, sentences: int | None = None,
              windows: int = 64, window_length: int = QA_WINDOW, repeats: int = 5,
              batch_size: int = PEER_BATCH, threads: int | None = None, bf16_budgets=(), log=print) -> BenchReport:
    if repeats < 1:
        raise BertevalError("--repeats must be at least 1")
    if threads:
        torch.set_num_threads(threads)
    loaded = models.load(model)
    texts, sent_source = load_sentences(data_dir, sentences)
    questions, qa_source = load_questions(data_dir) if windows else ([], "skipped (--windows 0)")
    notes = [f"attention: {loaded.encoder.config._attn_implementation} (every berteval path; bf16 (weights) copies "
             f"the model as loaded), token budget per batch: fp32 {features.MAX_TOKENS['fp32']:,}, "
             f"bf16 {features.MAX_TOKENS['bf16']:,}"]
    log(f"matmul peak ({torch.get_num_threads()} threads) ...")
    peak = {"fp32": matmul_peak(torch.float32, repeats), "bf16": matmul_peak(torch.bfloat16, repeats)}
    log(f"sentences: {len(texts)} x {repeats + 1} rounds ...")
    timings, parity, bf16, left_out = bench_sentences(loaded, texts, repeats, batch_size, bf16_budgets)
    notes += left_out
    if windows:
        log(f"QA windows: {windows} x {repeats + 1} rounds ...")
        more, bf16_windows = bench_windows(loaded, questions, windows, window_length, repeats, batch_size)
        timings += more
        bf16.update(bf16_windows)
    return BenchReport(model=loaded.model_id, machine=machine(), threads=torch.get_num_threads(), repeats=repeats,
                       sentences_source=sent_source, qa_source=qa_source, peak_gflops=peak, timings=timings,
                       parity=parity, bf16=bf16, notes=notes)


def _bf16_line(name: str, fig: dict) -> str:
    if "lowest_cosine" in fig:
        return f"  {name}: lowest cosine {fig['lowest_cosine']:.6f}, max |diff| {fig['max_abs_diff']:.2e}"
    return (f"  {name}: max |logit diff| {fig['max_abs_logit_diff']:.3f}, best start and end as fp32's in "
            f"{fig['same_best_start_and_end']} of {fig['windows']} windows")


def format_report(rep: BenchReport) -> str:
    lines = [f"model {rep.model}; {rep.machine}",
             f"sentences: {rep.sentences_source}; QA windows: {rep.qa_source}",
             f"median of {rep.repeats} interleaved rounds after a warm-up round; peers at batch {PEER_BATCH}",
             "matmul peak: " + ", ".join(f"{d} {g:,.0f} GFLOP/s" for d, g in rep.peak_gflops.items()),
             ""]
    width = max(len(t.label) for t in rep.timings)
    header = (f"{'section':<11} {'path':<{width}} {'items/s':>9} {'min-max s':>13} {'tok/item':>8} "
              f"{'GFLOP/s':>8} {'% peak':>6} {'fp32 /':>7} {'bf16w /':>7}")
    lines += [header, "-" * len(header)]
    for section in dict.fromkeys(t.section for t in rep.timings):
        rows = [t for t in rep.timings if t.section == section]
        base = {t.dtype: t.per_s for t in rows if t.path == BERTEVAL and not t.max_tokens}
        for t in rows:
            ratio = lambda d: f"{base[d] / t.per_s:.2f}x" if d in base else "-"  # noqa: E731
            lines.append(f"{section:<11} {t.label:<{width}} {t.per_s:>9,.1f} "
                         f"{min(t.times_s):>6.2f}-{max(t.times_s):<6.2f} {t.n_tokens / t.n_items:>8.1f} "
                         f"{t.gflops:>8,.1f} {100 * t.gflops / rep.peak_gflops[t.peak_dtype]:>5.0f}% "
                         f"{ratio(FP32):>7} {ratio(BF16_WEIGHTS):>7}")
    lines += ["", f"'fp32 /' and 'bf16w /': items/s of berteval fp32 and of berteval {BF16_WEIGHTS} divided by "
                  "this row's; '% peak': of the matmul peak in the row's dtype.",
              f"{BF16_WEIGHTS}: the model's weights cast to bf16 (frozen inference: probes, pretrained heads, the "
              f"served model); {BF16_AUTOCAST}: fp32 weights under autocast (training and the evaluation after it).",
              "GFLOP/s: encoder FLOPs over the real (unpadded) tokens / median time; see bench.encoder_flops.", ""]
    for name, diff in rep.parity.items():
        verdict = " ok" if diff <= PARITY_TOL else f" ABOVE {PARITY_TOL:g}"
        lines.append(f"parity, {name}: max |diff| {diff:.2e}{verdict}")
    if rep.bf16:
        lines.append("bf16 against berteval fp32, same inputs:")
        lines += [_bf16_line(name, fig) for name, fig in rep.bf16.items()]
    lines += [f"note: {n}" for n in rep.notes]
    return "\n".join(lines)
