"""`--regime pretrained`: the checkpoint's own trained head, scored as is, no training.

For sentence-pair tasks (NSP) that is the next-sentence head on the checkpoint's pooler
(`berteval.heads.nsp`); for span QA a checkpoint's own QA head (`berteval.qa.regimes`).
Where the checkpoint has no such head, transformers would attach a random one: refused.
A pretrained head has nothing to seed and reads its own vector, so a run is one cell.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import precision, records
from ..qa.regimes import SpanPretrained
from ..tasks.base import PAIR, SPAN, Split
from .base import Cell, CellRegime, CellResult, Regime

NSP_HEAD = "nsp-head"  # what the head reads, in the record's pooling field


@dataclass
class _Prepared:
    run: object
    evals: Split
    data_sha: str


class NSPPretrained(CellRegime):
    def cells(self, run) -> list[Cell]:
        if run.spec.seeds != [0] or run.spec.layers or run.spec.poolings or run.spec.train_sizes:
            run.note("the pretrained NSP head has no seed and reads its own pooler: one record (seed 0, layer -1); "
                     "--seeds, --layers, --pooling and --train-sizes do not apply")
        return [Cell(NSP_HEAD, -1, 0)]

    def identity(self, run, cell: Cell) -> dict:
        return {"schema": records.SCHEMA_VERSION, "model": run.identity.model_id, "revision": run.identity.revision,
                "task": run.task.name, "task_version": run.task.version, "data": self._sha(run),
                "pooling": NSP_HEAD, "regime": run.spec.regime, "layer": -1, "seed": 0,
                "max_length": run.max_length, "dtype": run.spec.dtype, **precision.identity(run.spec.dtype)}

    def _sha(self, run) -> str:
        return run.task.subset(run.data, run.data.train, run.eval_split())

    def prepare(self, run, todo: list[Cell]) -> _Prepared:
        from ..heads.nsp import require_pretrained_head

        require_pretrained_head(run.model)  # refuse before any pair is scored
        return _Prepared(run, run.eval_split(), self._sha(run))

    def fit_predict(self, prep: _Prepared, cell: Cell, run_id: str) -> CellResult:
        import time

        import numpy as np

        from ..heads.nsp import pretrained_proba
        from ..pairs import LABELS, NOT_NEXT

        run, evals = prep.run, prep.evals
        t0 = time.perf_counter()
        proba = pretrained_proba(run.model, evals.texts, run.max_length, run.spec.dtype)
        wall = time.perf_counter() - t0
        run.report.encode_wall_s, run.report.encoded_examples = wall, len(evals)
        y, pred = np.asarray(evals.labels), proba.argmax(1)
        return CellResult(
            metrics=run.score(pred=pred, label=y), data_sha256=prep.data_sha, split=evals.name, n_train=0,
            n_eval=len(evals),
            config={"data_source": run.data.source, "train_examples_available": len(run.data.train),
                    "max_length": run.max_length,
                    "head": "the checkpoint's seq_relationship layer on its pooler_output, no training",
                    "label_order": {str(i): name for i, name in enumerate(LABELS)}, **precision.identity(run.spec.dtype)},
            predictions={"run_id": run_id, "split": evals.name, "data_sha256": prep.data_sha,
                         "label": y.tolist(), "pred": pred.tolist(), "proba": np.round(proba[:, NOT_NEXT], 5).tolist()},
            correct=pred == y, wall_s=wall,
        )


REGIME = Regime(
    "pretrained",
    "the checkpoint's own trained head, scored as is with no training (refused where it has none)",
    {PAIR: NSPPretrained, SPAN: SpanPretrained},
)
