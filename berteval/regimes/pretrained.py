"""`--regime pretrained`: the checkpoint's own trained head, scored as is, no training.

For sentence-pair tasks (NSP) that is the next-sentence head on the checkpoint's pooler
(`berteval.heads.nsp`); for span QA a checkpoint's own QA head (`berteval.regimes.span`).
Where the checkpoint has no such head, transformers would attach a random one: refused.
A pretrained head has nothing to seed and reads its own vector, so a run is one cell.
"""

from __future__ import annotations

from .. import precision
from ..errors import BertevalError
from ..tasks.base import PAIR, SPAN
from .base import Cell, CellRegime, CellResult, Contract, Prepared, Regime, classified
from .span import SpanPretrained

NSP_HEAD = "nsp-head"  # what the head reads, in the record's pooling field


class NSPPretrained(CellRegime):
    # No option of its own: nothing trains, and the head reads its own pooler on the last layer. Its
    # identity names no training set (nothing is trained on one).
    contract = Contract(cell=("pooling", "layer"), optional=("bf16", "processes"))

    def cells(self, run) -> list[Cell]:
        if run.task.name != "nsp":
            raise BertevalError(f"the pretrained regime scores a checkpoint's own next-sentence head, which answers "
                                f"NSP only; {run.task.name} needs a trained head: --regime probe or finetune")
        if run.spec.seeds != [0]:
            run.note("the pretrained NSP head has no seed and reads its own pooler: one record (seed 0, layer -1); "
                     "--seeds does not apply")
        return [Cell(NSP_HEAD, -1, 0)]

    def splits(self, run):
        evals = run.eval_split()
        return run.data.train, evals, run.task.subset(run.data, run.data.train, evals)

    def prepare(self, run, todo: list[Cell]) -> Prepared:
        from ..heads.nsp import require_pretrained_head

        require_pretrained_head(run.model)  # refuse before any pair is scored
        _, evals, data_sha = self.splits(run)
        return Prepared(run, evals=evals, data_sha=data_sha)

    def fit_predict(self, prep: Prepared, cell: Cell, run_id: str) -> CellResult:
        import time

        from ..heads.nsp import pretrained_proba
        from ..nsp_pairs import LABELS, NOT_NEXT

        run, evals = prep.run, prep.evals
        t0 = time.perf_counter()
        proba = pretrained_proba(run.model, evals.texts, run.max_length, run.spec.dtype)
        wall = time.perf_counter() - t0
        run.report.encode_wall_s, run.report.encoded_examples = wall, len(evals)
        return classified(
            prep, run_id, proba.argmax(1), proba, positive=NOT_NEXT, n_train=0,
            config={"data_source": run.data.source, "train_examples_available": len(run.data.train),
                    "max_length": run.max_length,
                    "head": "the checkpoint's seq_relationship layer on its pooler_output, no training",
                    "label_order": {str(i): name for i, name in enumerate(LABELS)}, **precision.identity(run.spec.dtype)},
            wall_s=wall)


REGIME = Regime(
    "pretrained", "pretrained head",
    "the checkpoint's own trained head, scored as is with no training (refused where it has none)",
    {PAIR: NSPPretrained, SPAN: SpanPretrained},
)
