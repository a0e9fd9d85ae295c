"""Span QA inference: a model with a start/end head over every token, run over windows
and decoded into answers. `spans` (windows -> logits -> n-best answers) is the one path
used by `berteval run --task squad`, the app and the bench.

Why two logits per token: an answer is a span of the context, so the head (one
`Linear(hidden, 2)` over `last_hidden_state`, as in BertForQuestionAnswering) scores
every token as a possible start and as a possible end, where classification reads a
single pooled vector.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .. import devices, models, precision
from ..errors import BertevalError
from ..models.base import save_peft
from . import DEFAULTS, QASettings
from .decode import Candidate, best_spans
from .windows import Windows, make_windows

ADAPTER_CONFIG = "berteval_qa.json"  # written beside a saved adapter: what it was trained from


@dataclass
class QAModel:
    model: torch.nn.Module  # *ForQuestionAnswering: returns start_logits, end_logits
    tokenizer: object
    source: str  # what the head is: "pretrained QA head of ...", "LoRA fine-tuned ...", ...
    run_id: str | None = None  # the record behind a committed head (its calibration is filed under it)


@dataclass
class Answer:
    nbest: list[Candidate]
    tokens: list[str]  # tokens of the best answer's window, for showing the logits
    start_logits: np.ndarray  # (T,) of that window
    end_logits: np.ndarray  # (T,)
    n_windows: int
    null_score: float | None = None  # the [CLS] start + end logit, the lowest over the question's windows


NO_QA_HEAD_ADVICE = "Use --regime finetune or --regime probe, or a SQuAD checkpoint."


def head_model(loaded: models.LoadedModel, require_pretrained: bool = False,
               advice: str = NO_QA_HEAD_ADVICE) -> torch.nn.Module:
    """The checkpoint as AutoModelForQuestionAnswering; refuse a random head where a trained one is required,
    saying `advice` (what the caller's user can do instead: the CLI names regimes, the page other models)."""
    from transformers import AutoModelForQuestionAnswering

    model, missing = models.load_with_head(loaded, AutoModelForQuestionAnswering)
    head_missing = [k for k in missing if "qa_outputs" in k]
    if require_pretrained and head_missing:
        raise BertevalError(
            f"model {loaded.model_id!r} has no trained QA head: its checkpoint holds no weights for the layer that "
            f"scores each token as an answer's start and end, so transformers would attach a random one. {advice}"
        )
    return model


MAX_TOKENS = 8192  # padded tokens per batch of windows on the CPU; a GPU's comes from its free memory


@torch.inference_mode()
def window_logits(model: torch.nn.Module, tokenizer, windows: Windows, dtype: str = "fp32",
                  max_tokens: int | None = None, progress: bool = False,
                  how: str | None = precision.FROZEN) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Start and end logits (each (T_w,) float32) for every window, length-sorted batches.

    `how` says how bf16 runs (`berteval.precision`): FROZEN (the default: a served, committed or
    pretrained model, or a frozen encoder under a probe's head) on the model's bf16 copy; MIXED
    (the evaluation right after a fine-tune, as it trained) under autocast; None for a model that
    applies the dtype inside (`qa.vector.VectorQA`). Batches hold `max_tokens` padded tokens (None:
    MAX_TOKENS on the CPU, the device's budget on a GPU); a batch that runs out of GPU memory is
    retried at half of it (`berteval.devices.batched`), not a failed run."""
    from tqdm.auto import tqdm

    model.eval()
    lengths = np.array([len(f["input_ids"]) for f in windows.features])
    starts: list[np.ndarray | None] = [None] * len(windows)
    ends: list[np.ndarray | None] = [None] * len(windows)
    bar = tqdm(total=len(windows), desc="QA windows", unit="win", disable=not progress, leave=False)

    def run(idx: np.ndarray) -> None:
        batch = devices.to(dict(tokenizer.pad([windows.features[j] for j in idx], return_tensors="pt")))
        with precision.running(model, dtype, how) as m:
            out = m(**batch)
        s, e = out.start_logits.float().cpu().numpy(), out.end_logits.float().cpu().numpy()  # (B, T)
        for row, j in enumerate(idx):
            starts[j], ends[j] = s[row, : lengths[j]], e[row, : lengths[j]]
        bar.update(len(idx))

    devices.batched(lengths, max_tokens or devices.token_budget(MAX_TOKENS), run)
    bar.close()
    return starts, ends


def decode(windows: Windows, contexts: list[str], starts, ends, n_best: int = DEFAULTS.n_best,
           max_answer_length: int = DEFAULTS.max_answer_length) -> list[list[Candidate]]:
    """n-best lists for every question from its windows' logits."""
    by_example = windows.windows_of()
    out = []
    for ex, context in enumerate(contexts):
        ws = by_example.get(ex, [])
        out.append(best_spans([starts[w] for w in ws], [ends[w] for w in ws], [windows.offsets[w] for w in ws],
                              context, n_best=n_best, max_answer_length=max_answer_length))
    return out


@dataclass
class Spans:
    windows: Windows
    nbest: list[list[Candidate]]  # per question, best first
    starts: list[np.ndarray]  # per window, (T_w,) start logits
    ends: list[np.ndarray]  # per window, (T_w,) end logits


def spans(model: torch.nn.Module, tokenizer, questions: list[str], contexts: list[str],
          settings: QASettings = DEFAULTS, dtype: str = "fp32", progress: bool = False,
          how: str | None = precision.FROZEN) -> Spans:
    """Questions and contexts -> windows -> start/end logits -> each question's n-best answers
    (`how`: see `window_logits`)."""
    windows = make_windows(tokenizer, questions, contexts, max_length=settings.max_length,
                           doc_stride=settings.doc_stride)
    starts, ends = window_logits(model, tokenizer, windows, dtype=dtype, progress=progress, how=how)
    nbest = decode(windows, contexts, starts, ends, settings.n_best, settings.max_answer_length)
    return Spans(windows, nbest, starts, ends)


def null_scores(found: Spans) -> list[float]:
    """Per question, the `[CLS]` "no answer" score (start + end logit of position 0), the lowest over its
    windows (inf for a question with no window): what a span's score is measured against."""
    by = found.windows.windows_of()
    return [min((float(found.starts[w][0] + found.ends[w][0]) for w in by.get(k, [])), default=float("inf"))
            for k in range(len(found.nbest))]


def spans_streamed(model: torch.nn.Module, tokenizer, questions: list[str], contexts: list[str],
                   settings: QASettings = DEFAULTS, dtype: str = "fp32", chunk: int = 256,
                   progress: bool = False, how: str | None = precision.FROZEN) -> tuple[list[list[Candidate]], int]:
    """(each question's n-best, number of windows) through `spans`, a chunk of questions at a time: the
    windows, token lists and logits of one chunk are freed before the next, so scoring all of SQuAD dev
    holds the answers, not 10,000 windows of Python objects."""
    from tqdm.auto import tqdm

    nbest: list[list[Candidate]] = []
    n_windows = 0
    bar = tqdm(total=len(questions), desc="QA questions", unit="q", disable=not progress, leave=False)
    for i in range(0, len(questions), chunk):
        found = spans(model, tokenizer, questions[i : i + chunk], contexts[i : i + chunk], settings, dtype, how=how)
        nbest += found.nbest
        n_windows += len(found.windows)
        bar.update(len(found.nbest))
    bar.close()
    return nbest, n_windows


def fitted(settings: QASettings, model: torch.nn.Module) -> QASettings:
    """The settings clipped to what a checkpoint can read: no window longer than its position table (a small
    checkpoint may have fewer than 384 positions), the doc stride shrunk with it."""
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if not limit or limit >= settings.max_length:
        return settings
    return dataclasses.replace(settings, max_length=limit, doc_stride=min(settings.doc_stride, limit // 4))


def answer(qa: QAModel, question: str, context: str, settings: QASettings = DEFAULTS, dtype: str = "fp32") -> Answer:
    """One question: the n-best answers and the logits of the window the best one came from."""
    found = spans(qa.model, qa.tokenizer, [question], [context], fitted(settings, qa.model), dtype)
    nbest = found.nbest[0]
    w = nbest[0].window if nbest else 0
    tokens = qa.tokenizer.convert_ids_to_tokens(found.windows.features[w]["input_ids"])
    return Answer(nbest, tokens, found.starts[w], found.ends[w], len(found.windows), null_scores(found)[0])


def save_adapter(model: torch.nn.Module, folder: Path, info: dict) -> None:
    """A peft adapter (LoRA weights + the span head) and what it was trained from, written as one folder: a
    kill or a full disk leaves the previous adapter (or none), never new weights without their info file."""
    from ..store import is_writer, write_atomic, write_folder_atomic

    if not is_writer():
        return

    def fill(stage: Path) -> None:
        save_peft(model, stage, info["base_model"])
        write_atomic(stage / ADAPTER_CONFIG, json.dumps(info, indent=1, sort_keys=True).encode("utf-8"))

    write_folder_atomic(Path(folder), fill)


def load_adapter(folder: Path) -> QAModel:
    """A committed QA adapter on top of the base model it was trained from."""
    from peft import PeftModel

    folder = Path(folder)
    info_file = folder / ADAPTER_CONFIG
    if not info_file.is_file():
        raise BertevalError(f"{folder} is not a berteval QA adapter (no {ADAPTER_CONFIG})")
    info = json.loads(info_file.read_text())
    loaded = models.load(info["base_model_arg"])
    if loaded.revision != info["base_revision"]:
        raise BertevalError(f"adapter {folder} was trained on {info['base_revision']}, not {loaded.revision}")
    base = head_model(loaded)
    model = PeftModel.from_pretrained(base, str(folder)).merge_and_unload()
    model.eval()
    return QAModel(model, loaded.tokenizer, f"LoRA fine-tuned on SQuAD ({info.get('summary', folder.name)})")
