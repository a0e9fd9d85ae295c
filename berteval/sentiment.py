"""The app's sentence classifier: the committed SST-2 probe heads, one per pooling, run live.

A visitor types a sentence and sees what a head reading `cls`, `pooler` or `mean` makes
of it. The heads are not retrained here: each is the affine map a `berteval run --task
sst2` probe saved (`config["head_file"]`, logit of class 1 = positive on the raw pooled
vector), so the page shows exactly the heads whose dev accuracy the leaderboard reports.
Per pooling we take the last layer and, among the records of the full-size setup, the
seed with the best dev accuracy; one forward pass then feeds every head.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import features, models, records
from .errors import BertevalError

RESULTS = Path(__file__).resolve().parent.parent / "leaderboard" / "results"
TASK = "sst2"
LABELS = ("negative", "positive")  # SST-2's label order: the head's logit is for index 1


@dataclass
class SentimentHead:
    pooling: str
    weight: np.ndarray  # (1, H): logit of "positive"
    bias: np.ndarray  # (1,)
    run_id: str  # the record this head was saved by
    seed: int
    dev_accuracy: float  # that record's accuracy on SST-2 dev
    mean_dev_accuracy: float  # the mean over the seeds of the same setup
    n_seeds: int
    n_train: int
    max_length: int


def _usable(rec: records.RunRecord, model: models.LoadedModel, version: str, results: Path) -> bool:
    return (rec.task == TASK and rec.task_version == version and rec.regime == "probe" and rec.layer == -1
            and rec.model == model.model_id and rec.model_revision == model.revision
            and bool(rec.config.get("head_file")) and (results / rec.config["head_file"]).is_file())


def committed_heads(model: models.LoadedModel, results: str | Path | None = None) -> dict[str, SentimentHead]:
    """{pooling: head} for this exact model revision, in pooling-registry order."""
    from .pooling import POOLINGS
    from .tasks import get

    results = Path(results) if results is not None else RESULTS
    file = results / f"{TASK}.jsonl"
    recs, _ = records.read_records([file]) if file.is_file() else ([], [])
    mine = [r for r in recs if _usable(r, model, get(TASK).version, results)]
    if not mine:
        raise BertevalError(
            f"no committed SST-2 probe heads for {model.model_id!r} (revision {model.revision}) in {file}. "
            f"Train them: python -m berteval run --task sst2 --model ... --pooling cls,pooler,mean "
            f"--data-dir ../shared/data --out {results}"
        )
    heads = {}
    for pooling in sorted({r.pooling for r in mine}, key=lambda p: list(POOLINGS).index(p) if p in POOLINGS else 99):
        rs = [r for r in mine if r.pooling == pooling]
        # The full-size setup (most training sentences) beats a quick --limit-train run; within
        # it the best dev accuracy, ties to the lowest seed, so the choice never depends on file order.
        n_train = max(r.n_train for r in rs)
        same = [r for r in rs if r.n_train == n_train]
        best = min(same, key=lambda r: (-r.main_value, r.seed, r.run_id))
        head = np.load(results / best.config["head_file"])
        heads[pooling] = SentimentHead(
            pooling=pooling, weight=head["weight"], bias=head["bias"], run_id=best.run_id, seed=best.seed,
            dev_accuracy=best.main_value, mean_dev_accuracy=float(np.mean([r.main_value for r in same])),
            n_seeds=len(same), n_train=n_train, max_length=int(best.config.get("max_length") or 128),
        )
    return heads


def p_positive(model: models.LoadedModel, heads: dict[str, SentimentHead], text: str) -> dict[str, float]:
    """{pooling: P(positive)} for one sentence under every head, from one forward pass."""
    if not heads:
        return {}
    max_length = max(h.max_length for h in heads.values())
    vecs = features.encode(model, [text], data_sha256="live", poolings=list(heads), layers=[-1],
                           max_length=max_length, use_cache=False, progress=False).vectors
    out = {}
    for name, head in heads.items():
        logit = float((vecs[(name, -1)] @ head.weight.T + head.bias)[0, 0])  # (1, H) @ (H, 1)
        out[name] = float(1.0 / (1.0 + np.exp(-logit)))
    return out
