"""Next-sentence heads: a checkpoint's own pretrained NSP head, scored as is, and the
offline head the app uses when a checkpoint has none.

transformers attaches a randomly initialised NSP head to any checkpoint that lacks one
(all-MiniLM-L6-v2 has none), so `--regime pretrained` refuses such a checkpoint rather
than report noise as BERT's head. For the demo, the fallback is the best committed
probe for the model (a logistic regression on one pooled vector, trained by
`berteval run --task nsp`), and every answer says which of the two produced it.

Label order, BERT's: index 0 = IsNext (B follows A), index 1 = NotNext. The probe's
head gives the logit of class 1, so P(IsNext) = 1 - sigmoid(logit).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from . import features, models, records
from .errors import BertevalError
from .pairs import IS_NEXT, LABELS, NOT_NEXT

if TYPE_CHECKING:  # runner imports the task registry, which names this module: import it lazily
    from .runner import RunReport, RunSpec

PRETRAINED_SOURCE = "pretrained NSP head"
PAIR_MAX_LENGTH = 128  # tokens for [CLS] A [SEP] B [SEP] when the run does not say
RESULTS = Path(__file__).resolve().parent.parent / "leaderboard" / "results"


def require_pretrained_head(model: models.LoadedModel) -> torch.nn.Module:
    """The checkpoint's NSP model, or a refusal that says why and what to run instead."""
    if model.nsp_model is not None:
        return model.nsp_model
    missing = [k for k in model.heads.missing_keys if "seq_relationship" in k]
    why = (f"the checkpoint lacks {', '.join(missing)}" if missing
           else "its architecture has no next-sentence head")
    raise BertevalError(
        f"model {model.model_id!r} has no pretrained next-sentence (NSP) head ({why}). transformers would "
        f"silently attach a randomly initialised head, and its accuracy would be noise, not the model's. "
        f"Use --regime probe to train a probe on its pooled vectors, or a checkpoint pre-trained with NSP "
        f"such as bert-base-uncased."
    )


@torch.inference_mode()
def pretrained_proba(model: models.LoadedModel, pairs: list[tuple[str, str]], max_length: int = PAIR_MAX_LENGTH,
                     dtype: str = "fp32") -> np.ndarray:
    """(N, 2) softmax of the checkpoint's NSP logits: column 0 = P(IsNext), column 1 = P(NotNext)."""
    head = require_pretrained_head(model)
    out = np.zeros((len(pairs), 2), dtype=np.float32)
    for idx, batch in features.padded_batches(model, pairs, max_length):
        with features.autocast(dtype):
            logits = head(**batch).logits  # (B, 2): seq_relationship, index 0 = IsNext
        out[idx] = torch.softmax(logits.float(), dim=-1).numpy()
    return out


def run_pretrained(spec: RunSpec) -> RunReport:
    """`berteval run --task nsp --regime pretrained`: the checkpoint's NSP head on the eval pairs, once.

    The head is deterministic, so there is one record (seed 0) whatever --seeds says."""
    from . import runner

    report = runner.RunReport()
    model = models.load(spec.model, spec.revision)
    require_pretrained_head(model)  # before reading any data: the refusal should be instant
    if spec.seeds != [0] or spec.layers:
        report.notes.append("the pretrained NSP head has no seed and reads its own pooler: "
                            "one record (seed 0, layer -1); --seeds, --layers and --pooling do not apply")
    max_length = spec.max_length or PAIR_MAX_LENGTH
    data = spec.task.load(spec.data_dir)
    evals = data.eval
    path = runner.records_path(spec.out, spec.task.name)
    existing = runner.existing_records(path, report.notes)
    rid = records.run_id({
        "schema": records.SCHEMA_VERSION, "model": model.model_id, "revision": model.revision,
        "task": spec.task.name, "task_version": spec.task.version, "data": data.data_sha256,
        "pooling": "nsp-head", "regime": spec.regime, "layer": -1, "seed": 0,
        "max_length": max_length, "dtype": spec.dtype,
    })
    if rid in {r.run_id for r in existing}:
        report.skipped.append(rid)
        return report

    t0 = time.perf_counter()
    proba = pretrained_proba(model, evals.texts, max_length, spec.dtype)
    wall = time.perf_counter() - t0
    report.encode_wall_s, report.encoded_examples = wall, len(evals)
    y = np.asarray(evals.labels)
    pred = proba.argmax(1)
    pred_rel = f"predictions/{spec.task.name}/{rid}.json"
    records.write_json_atomic(Path(spec.out) / pred_rel, {
        "run_id": rid, "split": evals.name, "data_sha256": data.data_sha256,
        "label": y.tolist(), "pred": pred.tolist(), "proba": np.round(proba[:, NOT_NEXT], 5).tolist(),
    })
    rec = runner.new_record(
        spec, model, run_id=rid, data_sha256=data.data_sha256, split=evals.name, pooling="nsp-head",
        layer=-1, seed=0, metrics={"accuracy": float((pred == y).mean())}, n_train=0, n_eval=len(evals),
        config={
            "data_source": data.source,
            "train_examples_available": len(data.train),
            "max_length": max_length,
            "head": "the checkpoint's seq_relationship layer on its pooler_output, no training",
            "label_order": {str(i): name for i, name in enumerate(LABELS)},
        },
        wall_s=wall, predictions_file=pred_rel,
    )
    records.append_record(path, rec)
    report.written.append(rec)
    return report


@dataclass
class NSPPrediction:
    p_is_next: float  # probability that B follows A
    label: str  # "IsNext" or "NotNext"
    source: str  # which head answered, in words a user reads


@dataclass
class DemoHead:
    """What the app calls: the model plus the NSP head it will answer with."""

    model: models.LoadedModel
    source: str  # "pretrained NSP head" or "trained probe on <pooling>, not BERT's pre-training head"
    pooling: str | None = None  # probe only: the pooled vector the probe reads ...
    layer: int = -1  # ... at this hidden-state index
    weight: np.ndarray | None = None  # (1, H): logit of class 1 = NotNext
    bias: np.ndarray | None = None  # (1,)
    max_length: int = PAIR_MAX_LENGTH
    run_id: str | None = None  # the record the probe head comes from
    dev_accuracy: float | None = None  # that pooling/layer's mean accuracy across seeds

    def predict(self, a: str, b: str) -> NSPPrediction:
        return predict_is_next(self, a, b)


def _best_probe_record(model: models.LoadedModel, results: Path) -> tuple[records.RunRecord, float]:
    """The best (pooling, layer) by mean dev accuracy across seeds, and its best seed's record."""
    from .tasks import get

    task = get("nsp")
    recs, _ = records.read_records([results / "nsp.jsonl"]) if (results / "nsp.jsonl").is_file() else ([], [])
    mine = [r for r in recs if r.task == task.name and r.task_version == task.version and r.regime == "probe"
            and r.model == model.model_id and r.model_revision == model.revision
            and (results / r.config.get("head_file", "")).is_file()]
    if not mine:
        raise BertevalError(
            f"model {model.model_id!r} has no pretrained NSP head and {results / 'nsp.jsonl'} holds no probe head "
            f"for it. Train one: python -m berteval run --task nsp --model ... --data-dir ../shared/data "
            f"--out {results}"
        )
    groups: dict[tuple, list[records.RunRecord]] = {}
    for r in mine:
        groups.setdefault((r.pooling, r.layer, r.data_sha256, r.n_train), []).append(r)
    best = max(groups.values(), key=lambda rs: np.mean([r.main_value for r in rs]))
    mean = float(np.mean([r.main_value for r in best]))
    return max(best, key=lambda r: (r.main_value, -r.seed)), mean


def load_demo_head(model: str = models.DEFAULT, results: str | Path | None = None) -> DemoHead:
    """The checkpoint's pretrained NSP head where it has one, else the best committed probe head."""
    loaded = models.load(model)
    if loaded.nsp_model is not None:
        return DemoHead(loaded, PRETRAINED_SOURCE)
    results = Path(results) if results is not None else RESULTS
    rec, mean = _best_probe_record(loaded, results)
    head = np.load(results / rec.config["head_file"])
    return DemoHead(
        loaded, f"trained probe on {rec.pooling}, not BERT's pre-training head",
        pooling=rec.pooling, layer=rec.layer, weight=head["weight"], bias=head["bias"],
        max_length=int(rec.config.get("max_length") or PAIR_MAX_LENGTH), run_id=rec.run_id, dev_accuracy=mean,
    )


def predict_is_next(head: DemoHead, a: str, b: str) -> NSPPrediction:
    """P(B follows A) from the head, with the head's name."""
    if head.weight is None:
        p_is_next = float(pretrained_proba(head.model, [(a, b)], head.max_length)[0, IS_NEXT])
    else:
        vec = features.encode(head.model, [(a, b)], data_sha256="live", poolings=[head.pooling], layers=[head.layer],
                              max_length=head.max_length, use_cache=False, progress=False).vectors
        logit = float((vec[(head.pooling, head.layer)] @ head.weight.T + head.bias)[0, 0])  # class 1 = NotNext
        p_is_next = float(1.0 - 1.0 / (1.0 + np.exp(-logit)))
    return NSPPrediction(p_is_next, LABELS[IS_NEXT] if p_is_next >= 0.5 else LABELS[NOT_NEXT], head.source)
