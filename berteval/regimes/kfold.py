"""k-fold cross-validation over dev *articles*: the quality of a span head trained on every question we have.

The app's QA head may learn from the official dev questions too (the demo is not the
leaderboard), so its quality cannot be measured on them. It is estimated instead: the 48 dev
articles are dealt into k folds; fold i's head trains on the train questions plus the dev
questions of the other folds' articles and answers the questions of its own held-out articles.
Every dev question is then answered exactly once, by a head that never saw its article (a
question's neighbours in one paragraph share its answers, so folds split articles, not
questions). A last head, trained on everything, is the one the app serves; the k fold heads are
its estimate.

`python -m berteval run --task squad --regime <a fine-tune regime> --folds 2` wraps that regime
(`KFold`): cells are fold 1..k, then "all"; each fold writes its own record, and the "all" cell
writes the estimate (out-of-fold answers of every dev question, scored together) with the
served adapter. Their splits say "validation, k-fold by article", so no reader mistakes them
for official-dev scores: the leaderboard shows them apart and never ranks them with those.
Torch-free at import time.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from .. import records
from ..errors import BertevalError
from ..tasks.base import Split, TaskData
from .base import Cell, CellRegime, CellResult, Prepared

KFOLD_PREFIX = "validation, k-fold"  # every k-fold record's split starts with this (by article, or over pairs)
KFOLD_SPLIT = KFOLD_PREFIX + " by article"  # span QA's folds: dev articles
ALL = 0  # the fold number of the cell that trains on every question (the served head)


def is_kfold(split: str) -> bool:
    """A k-fold record (a fold or the estimate): never ranked with official-dev records."""
    return str(split).startswith(KFOLD_PREFIX)


def is_estimate(record: records.RunRecord) -> bool:
    """The k-fold estimate that comes with a served head (the "all" cell), not one fold's part."""
    return is_kfold(record.split) and isinstance(record.config.get("folds"), list)


def assign_folds(groups: list[str], k: int) -> dict[str, int]:
    """Article -> fold (1..k). Largest article first, each into the fold with the fewest questions so far
    (ties: the lower fold; equal sizes: by title), so the folds' sizes differ by less than one article."""
    sizes = Counter(groups)
    if len(sizes) < k:
        raise BertevalError(f"{k} folds need at least {k} dev articles; the dev set has {len(sizes)}")
    load = [0] * k
    out: dict[str, int] = {}
    for title in sorted(sizes, key=lambda t: (-sizes[t], t)):
        fold = min(range(k), key=lambda f: (load[f], f))
        out[title] = fold + 1
        load[fold] += sizes[title]
    return out


def _concat(name: str, *splits: Split) -> Split:
    return Split(name, [x for s in splits for x in s.texts], [x for s in splits for x in s.labels],
                 [x for s in splits for x in s.ids], [x for s in splits for x in s.groups])


def fold_split_name(k: int, fold: int, n_articles: int) -> str:
    return f"{KFOLD_SPLIT} (k={k}): fold {fold}, {n_articles} held-out articles"


def fold_data(task, data: TaskData, k: int) -> dict[int, TaskData]:
    """fold -> the TaskData its head trains and is scored on; ALL -> every question (scored on nothing new)."""
    dev = data.eval
    if not dev.groups or any(not g for g in dev.groups):
        raise BertevalError("k-fold by article needs the article of every dev question (SQuAD's titles)")
    folds = assign_folds(dev.groups, k)
    out = {}
    for f in range(1, k + 1):
        held = [i for i, g in enumerate(dev.groups) if folds[g] == f]
        kept = [i for i, g in enumerate(dev.groups) if folds[g] != f]
        n_articles = sum(1 for v in folds.values() if v == f)
        train = _concat("train", data.train, dev.subset(kept))
        evals = dev.subset(held)
        evals.name = fold_split_name(k, f, n_articles)
        out[f] = TaskData(train, evals, data.source, task.checksum(train, evals), data.details)
    train = _concat("train", data.train, dev)
    evals = Split(f"{KFOLD_SPLIT} (k={k})", dev.texts, dev.labels, dev.ids, dev.groups)
    out[ALL] = TaskData(train, evals, data.source, task.checksum(train, evals), data.details)
    return out


@dataclass(frozen=True)
class FoldCell(Cell):
    fold: int = ALL  # 1..k: trained without this fold's articles, scored on them; ALL: trained on everything

    @classmethod
    def of(cls, cell: Cell, fold: int) -> "FoldCell":
        return cls(**{f.name: getattr(cell, f.name) for f in dataclasses.fields(Cell)}, fold=fold)

    def base(self) -> Cell:
        """The wrapped regime's own cell (every field but the fold)."""
        return Cell(**{f.name: getattr(self, f.name) for f in dataclasses.fields(Cell)})


class _View:
    """The run as one fold sees it: the same spec, model and store; that fold's data."""

    def __init__(self, run, data: TaskData):
        self._run, self.data = run, data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._run, name)

    def eval_split(self) -> Split:
        return self.data.eval


class KFold(CellRegime):
    """Cross-validation by article around a regime that fine-tunes a span head: one whose contract takes
    `folds` (the run loop refuses --folds for any other) and that offers `fit` and `evaluate`."""

    def __init__(self, inner: CellRegime, k: int):
        if "folds" not in inner.contract.optional:
            raise BertevalError(f"{type(inner).__name__} does not declare k-fold cells (Contract.optional 'folds')")
        if k < 2:
            raise BertevalError(f"--folds needs at least 2 folds, not {k}")
        self.inner, self.k = inner, k
        self.contract = inner.contract
        self._data: dict[int, TaskData] | None = None

    @property
    def bf16_path(self) -> str:
        """How the wrapped regime runs bf16 (its record says what precision ran)."""
        return self.inner.bf16_path

    def _view(self, run, fold: int) -> _View:
        if self._data is None:
            self._data = fold_data(run.task, run.data, self.k)
        return _View(run, self._data[fold])

    def cells(self, run) -> list[Cell]:
        if run.spec.limit_eval is not None:
            raise BertevalError("--folds answers every dev question once; drop --limit-eval")
        return [FoldCell.of(c, f) for c in self.inner.cells(run) for f in (*range(1, self.k + 1), ALL)]

    def identity(self, run, cell: FoldCell) -> dict:
        """The inner regime's identity of the cell on its fold's data, plus the fold (the `folds` optional field)."""
        return {**self.inner.identity(self._view(run, cell.fold), cell.base()), "protocol": KFOLD_SPLIT, "k": self.k,
                "fold": cell.fold}

    def prepare(self, run, todo: list[Cell]) -> Prepared:
        return Prepared(run)  # each fold tokenises its own training windows when its turn comes

    def fit_predict(self, prep: Prepared, cell: FoldCell, run_id: str) -> CellResult:
        view = self._view(prep.run, cell.fold)
        base = cell.base()
        inner = self.inner.prepare(view, [base])
        if cell.fold != ALL:  # a fold head: trained, scored on its held-out articles, not kept
            model, config, train_wall, cleanup = self.inner.fit(inner, base, run_id, save=False)
            result = self.inner.evaluate(inner, model, run_id, {**config, **self._fold_config(view, cell)},
                                         train_wall, len(inner.train))
        else:  # the served head: trained on everything; its quality is the folds' out-of-fold answers
            model, config, train_wall, cleanup = self.inner.fit(inner, base, run_id, save=True)
            result = self._estimate(prep.run, cell, inner, config, train_wall)
        result.cleanup = cleanup
        return result

    def _fold_config(self, view: _View, cell: FoldCell) -> dict:
        held = sorted(set(view.data.eval.groups))
        return {"kfold": {"k": self.k, "fold": cell.fold, "held_out_articles": held}}

    def _fold_records(self, run, cell: FoldCell) -> list[records.RunRecord]:
        """The records of this seed's k folds, in fold order (written by the earlier cells of the run)."""
        found = {r.run_id: r for r in run.store.read(run.task.name)[0]}
        out = []
        for f in range(1, self.k + 1):
            rid = records.run_id(self.identity(run, FoldCell.of(cell.base(), f)))
            if rid not in found:
                raise BertevalError(f"fold {f} of {self.k} has no record ({rid}) under {run.store.root}: run the same "
                                    f"command again, it trains the missing folds first")
            out.append(found[rid])
        return out

    def _estimate(self, run, cell: FoldCell, inner, config: dict, train_wall: float) -> CellResult:
        """Every dev question's out-of-fold answer, scored together: the estimate for the head just trained."""
        folds = self._fold_records(run, cell)
        predictions: dict[str, str] = {}
        for rec in folds:
            predictions.update(json.loads(run.store.inside(rec.predictions_file).read_text()))
        dev = inner.evals
        if set(predictions) != set(dev.ids):
            raise BertevalError("the folds' answers do not cover every dev question exactly once")
        metrics = run.score(predictions=predictions, golds={q: list(g.texts) for q, g in zip(dev.ids, dev.labels)})
        per_fold = [{"fold": r.config["kfold"]["fold"], "run_id": r.run_id, "split": r.split, "n_train": r.n_train,
                     "n_eval": r.n_eval, **r.metrics,
                     "train_wall_s": r.config.get("training", {}).get("train_wall_s"),
                     "eval_wall_s": r.config.get("eval_wall_s"),
                     "held_out_articles": r.config["kfold"]["held_out_articles"]} for r in folds]
        config = {"data_source": run.data.source, "train_source": run.data.details.get("train_source"),
                  **config, "folds": per_fold,
                  "estimate": f"out-of-fold: each of the {len(dev):,} dev questions answered once by one of {self.k} "
                              f"heads that never saw its article; the served head (adapter_dir) was trained on all "
                              f"{len(inner.train):,} questions and has no held-out score of its own"}
        return CellResult(metrics={k: round(v, 4) for k, v in metrics.items()}, data_sha256=inner.data_sha,
                          split=dev.name, n_train=len(inner.train), n_eval=len(dev), config=config,
                          predictions=predictions, wall_s=train_wall)
