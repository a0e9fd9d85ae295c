"""What bf16 costs in answers: the same fine-tuned span model scored on SQuAD dev in each dtype,
through the one windows -> spans path the runs and the app use. The model is committed and
frozen, so bf16 runs on its bf16 weights (`precision.FROZEN`), as a served model would; the
autocast path (how bf16 ran before, and how a fine-tune's own evaluation still runs) on request."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from .. import precision
from ..qa import DEFAULTS, QASettings
from ..qa import inference as qa
from .encoders import BF16_WEIGHTS, FP32, QA_WINDOW, _stride

SQUAD_PATHS = (FP32, BF16_WEIGHTS)  # what --squad-dtypes scores; --squad-autocast adds BF16_AUTOCAST


@dataclass
class SquadDtype:
    dtype: str  # a key of precision.PATHS: "fp32", "bf16 (weights)", "bf16 (autocast)"
    exact_match: float
    f1: float
    wall_s: float  # windows + forward passes + decoding, as `berteval run --task squad` evaluates
    n_questions: int
    n_windows: int


def squad_by_dtype(data_dir: Path, qa_model: qa.QAModel | None = None, limit: int | None = None,
                   paths=SQUAD_PATHS, max_length: int = QA_WINDOW, log=print) -> tuple[str, list[SquadDtype]]:
    """The same fine-tuned span model scored on SQuAD dev in each path of `precision.PATHS`: what bf16 costs
    in EM/F1."""
    from .. import metrics
    from ..serve.qa import demo_model
    from ..tasks import squad

    qa_model = qa_model or demo_model()
    dev = squad.load(data_dir).eval
    dev = dev.subset(range(min(limit, len(dev)))) if limit else dev
    golds = {qid: list(g.texts) for qid, g in zip(dev.ids, dev.labels)}
    settings = QASettings(max_length, _stride(max_length), DEFAULTS.n_best, DEFAULTS.max_answer_length)
    out = []
    for label in paths:
        dtype, how = precision.PATHS[label]
        log(f"SQuAD dev, {len(dev)} questions, {label} ...")
        t0 = time.perf_counter()
        found = qa.spans(qa_model.model, qa_model.tokenizer, [q for q, _ in dev.texts], [c for _, c in dev.texts],
                         settings, dtype, how=how)
        wall = time.perf_counter() - t0
        best = {qid: (c[0].text if c else "") for qid, c in zip(dev.ids, found.nbest)}
        m = metrics.compute(("exact_match", "f1"), predictions=best, golds=golds)
        out.append(SquadDtype(label, m["exact_match"], m["f1"], wall, len(dev), len(found.windows)))
    return qa_model.source, out


def format_squad(source: str, rows: list[SquadDtype]) -> str:
    width = max(len("dtype"), *(len(r.dtype) for r in rows))
    lines = [f"SQuAD v1.1 dev, {source}",
             f"{'dtype':<{width}} {'EM':>7} {'F1':>7} {'questions':>9} {'windows':>7} {'wall s':>7} {'windows/s':>9}"]
    for r in rows:
        lines.append(f"{r.dtype:<{width}} {r.exact_match:>7.2f} {r.f1:>7.2f} {r.n_questions:>9,} {r.n_windows:>7,} "
                     f"{r.wall_s:>7.1f} {r.n_windows / r.wall_s:>9.1f}")
    for r in rows[1:]:
        lines.append(f"{r.dtype} - {rows[0].dtype}: EM {r.exact_match - rows[0].exact_match:+.2f}, "
                     f"F1 {r.f1 - rows[0].f1:+.2f} points")
    return "\n".join(lines)


