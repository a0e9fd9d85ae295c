"""The examples behind a paired test: where two heads of one run disagree, and who is right.

A McNemar p-value says two heads differ; it does not say on what. `python -m berteval disagree`
pairs two records of the same task and seed (same evaluation examples; by default the same model and regime), reads
their committed per-example predictions, and lists every example exactly one of them gets right:
first the counts (`N disagreements: A right B wrong X, B right A wrong Y`, the discordant counts
of the McNemar test in the records), then one line per example with its id, the gold label, each
head's prediction and its text. Texts come from the task's own loader (`tasks.get(task).load`)
when a data dir is given; without one the ids and labels still show. For SQuAD an answer is
right when it matches a gold answer exactly after the official normalisation (EM = 1).

The app's leaderboard tab and the report call `compare` too. Torch-free (the SST-2 and NSP
loaders read files through `datasets`, which loads no torch).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import record_lookup
from .errors import BertevalError
from .records import RunRecord
from .store import Store


@dataclass
class Example:
    index: int  # position in the evaluation split (and in the predictions file)
    id: str
    gold: str
    pred_a: str
    pred_b: str
    conf_a: float | None = None  # each head's probability for its own prediction, where recorded
    conf_b: float | None = None
    text: str | None = None  # sentence, "A ||| B" pair, or the question (SQuAD)

    @property
    def wrong_confidence(self) -> float:
        """How sure the head that is wrong was: the examples a reader should see first."""
        return max(c for c in (self.conf_a, self.conf_b, 0.0) if c is not None)


@dataclass
class Disagreement:
    task: str
    model: str
    seed: int
    a: RunRecord
    b: RunRecord
    n_eval: int
    a_only: list[Example] = field(default_factory=list)  # A right, B wrong
    b_only: list[Example] = field(default_factory=list)  # B right, A wrong
    note: str = ""  # what is missing (texts without a data dir)

    @property
    def name_a(self) -> str:
        return head_name(self.a, self.b)

    @property
    def name_b(self) -> str:
        return head_name(self.b, self.a)

    @property
    def n(self) -> int:
        return len(self.a_only) + len(self.b_only)

    def header(self) -> str:
        return (f"{self.n} disagreements: {self.name_a} right {self.name_b} wrong {len(self.a_only)}, "
                f"{self.name_b} right {self.name_a} wrong {len(self.b_only)}")

    def examples(self, limit: int | None = None) -> list[Example]:
        """Both kinds, most confidently wrong first within each, A-right ones first."""
        order = lambda xs: sorted(xs, key=lambda e: (-e.wrong_confidence, e.index))  # noqa: E731
        out = order(self.a_only) + order(self.b_only)
        return out if limit is None else order(self.a_only)[:limit] + order(self.b_only)[:limit]

    def lines(self, limit: int | None = None) -> list[str]:
        rows = [self.header()]
        for e in self.examples(limit):
            right = self.name_a if e in self.a_only else self.name_b
            rows.append(f"{e.id}\tgold {e.gold}\t{self.name_a}: {_pred(e.pred_a, e.conf_a)}\t"
                        f"{self.name_b}: {_pred(e.pred_b, e.conf_b)}\tright: {right}" + (f"\t{e.text}" if e.text is not None else ""))
        return rows

    def mcnemar_counts(self) -> tuple[int, int] | None:
        """(A right only, B right only) as the records' paired test has them, or None if neither record tested the other."""
        for rec, other, flip in ((self.a, self.b, False), (self.b, self.a, True)):
            for t in rec.paired_tests:
                if (t.get("other") or {}).get("run_id") == other.run_id:
                    mine, theirs = int(t["n_only_self_correct"]), int(t["n_only_other_correct"])
                    return (theirs, mine) if flip else (mine, theirs)
        return None


def _pred(label: str, conf: float | None) -> str:
    return label if conf is None else f"{label} ({conf:.2f})"


def head_name(rec: RunRecord, other: RunRecord | None = None) -> str:
    """`mean`, or `mean@5` off the last layer, or `span (finetune)` where the two heads differ in regime,
    `span (wiki-bert-mini)` where they differ in model."""
    name = rec.pooling if rec.layer == -1 else f"{rec.pooling}@{rec.layer}"
    differs = [] if other is None else [
        *([rec.regime] if other.regime != rec.regime else []),
        *([record_lookup.short_name(rec.model)] if other.model != rec.model else [])]
    return name + (f" ({', '.join(differs)})" if differs else "")


def parse_head(spec: str, layer: int = -1) -> tuple[str, int]:
    """`mean` or `mean@5` -> (pooling, layer)."""
    pooling, at, lay = spec.partition("@")
    if at:
        try:
            layer = int(lay)
        except ValueError:
            raise BertevalError(f"a head is POOLING or POOLING@LAYER (e.g. mean@5), not {spec!r}") from None
    return pooling, layer


def find(records: list[RunRecord], model: str, pooling: str, layer: int, seed: int, regime: str) -> RunRecord:
    """The one record of this head (the main setup where a cell was run in several)."""
    mid, recs = record_lookup.of_model(model, records)
    hits = [r for r in recs if r.pooling == pooling and r.layer == layer and r.seed == seed and r.regime == regime]
    if not hits:
        raise BertevalError(_not_found(recs, mid, pooling, layer, seed, regime))
    return record_lookup.main_setup(hits)[0]


def _not_found(recs: list[RunRecord], mid: str, pooling: str, layer: int, seed: int, regime: str) -> str:
    """What is missing and what to ask for instead, in one line: the head's seeds when only the seed is wrong,
    else the model's heads in the regime, else its regimes (never a list of every record)."""
    what = f"no {regime} record of {pooling} at layer {layer}"
    seeds = sorted({r.seed for r in recs if (r.pooling, r.layer, r.regime) == (pooling, layer, regime)})
    if seeds:
        return f"{what}, seed {seed}, for {mid}: its seeds are {', '.join(map(str, seeds))} (--seed)"
    heads = sorted({head_name(r) for r in recs if r.regime == regime})
    if heads:
        return f"{what} for {mid}; its {regime} heads: {', '.join(heads)} (--a, --b: POOLING or POOLING@LAYER)"
    regimes = sorted({r.regime for r in recs})
    return f"{what} for {mid}; it has {', '.join(regimes) or 'no'} records (--regime)"


@functools.lru_cache(maxsize=8)
def _split(task: str, data_dir: str):
    from .tasks import get

    return get(task).load(Path(data_dir)).eval


def eval_split(task: str, data_dir: str | os.PathLike | None):
    """The task's evaluation split from the data dir (cached per process), or None without one."""
    from .config import data_dir as resolve

    folder = resolve(data_dir)
    return None if folder is None else _split(task, str(folder.resolve()))


def _confidence(proba, pred) -> float | None:
    if proba is None:
        return None
    if isinstance(proba, (list, tuple)):
        return float(max(proba))
    return float(proba) if int(pred) == 1 else 1.0 - float(proba)


def compare(task: str, a: RunRecord, b: RunRecord, root: str | os.PathLike | None = None,
            data_dir: str | os.PathLike | None = None, split=None) -> Disagreement:
    """Every example exactly one of two records gets right. `split` (the evaluation Split) may be passed in;
    otherwise it is loaded from `data_dir` (option or $BERTEVAL_DATA) when one is given."""
    # Two models are compared on the same examples too (one pre-trained twin against the other): what must
    # match is the task, the seed asked for and the data each was scored on.
    if (a.task, a.seed, a.data_sha256) != (b.task, b.seed, b.data_sha256):
        raise BertevalError("the two heads must come from the same task, seed and data to be compared "
                            f"example by example ({head_name(a)}: {a.model} seed {a.seed}; "
                            f"{head_name(b)}: {b.model} seed {b.seed})")
    from .tasks import get

    # Refused before any prediction file or dataset is read: nothing of a regression is right or wrong.
    if get(task).regression:
        raise BertevalError(f"{task} is a regression: no example is right or wrong, so there is nothing to list; "
                            f"its records compare heads by a paired bootstrap of the correlation (the leaderboard)")
    store = Store(root)
    pa, pb = (_read_predictions(store, r) for r in (a, b))
    note = ""
    if split is None:
        try:
            split = eval_split(task, data_dir)
        except BertevalError as exc:
            note = f"texts not shown: {exc}"
        if split is None and not note:
            note = "texts not shown: pass --data-dir (or set BERTEVAL_DATA) to see each example"
    if task == "squad":
        return _compare_squad(task, a, b, pa, pb, split, note)
    for p, r in ((pa, a), (pb, b)):
        if "pred" not in p or "label" not in p:
            raise BertevalError(f"{r.predictions_file} holds no per-example pred/label lists")
    gold = np.asarray(pa["label"])
    if len(pb["label"]) != len(gold) or not np.array_equal(gold, np.asarray(pb["label"])):
        raise BertevalError("the two records were scored on different examples (their gold labels differ)")
    if split is not None and (len(split) != len(gold) or list(split.labels) != gold.tolist()):
        note = (f"texts not shown: the data under the data dir is not what these records were scored on "
                f"({len(split)} examples vs {len(gold)})")
        split = None
    names = get(task).labels
    label = lambda i: names[int(i)] if names and 0 <= int(i) < len(names) else str(i)  # noqa: E731
    pred_a, pred_b = np.asarray(pa["pred"]), np.asarray(pb["pred"])
    right_a, right_b = pred_a == gold, pred_b == gold
    out = Disagreement(task, a.model, a.seed, a, b, len(gold), note=note)
    for i in np.flatnonzero(right_a != right_b):
        i = int(i)
        e = Example(i, split.ids[i] if split is not None and split.ids else f"#{i}", label(gold[i]), label(pred_a[i]),
                    label(pred_b[i]), _confidence(pa.get("proba", [None] * len(gold))[i], pred_a[i]),
                    _confidence(pb.get("proba", [None] * len(gold))[i], pred_b[i]),
                    _text(split.texts[i]) if split is not None else None)
        (out.a_only if right_a[i] else out.b_only).append(e)
    return out


def _text(text) -> str:
    return " ||| ".join(text) if isinstance(text, tuple) else str(text)


def _compare_squad(task, a, b, pa, pb, split, note) -> Disagreement:
    from .metrics.squad import exact_match

    if split is None:
        raise BertevalError("SQuAD answers are right or wrong only against the gold answers: pass --data-dir "
                            "(or set BERTEVAL_DATA) with squad/dev-v1.1.json")
    out = Disagreement(task, a.model, a.seed, a, b, len(split), note=note)
    for i, (qid, answers) in enumerate(zip(split.ids, split.labels)):
        ans_a, ans_b = pa.get(qid, ""), pb.get(qid, "")
        ra = max(exact_match(ans_a, g) for g in answers.texts) == 1.0
        rb = max(exact_match(ans_b, g) for g in answers.texts) == 1.0
        if ra != rb:
            e = Example(i, qid, " | ".join(dict.fromkeys(answers.texts)), repr(ans_a), repr(ans_b),
                        text=split.texts[i][0])
            (out.a_only if ra else out.b_only).append(e)
    return out


def _read_predictions(store: Store, rec: RunRecord) -> dict:
    path = store.inside(rec.predictions_file) if rec.predictions_file else None
    if path is None or not path.is_file():
        raise BertevalError(f"record {rec.run_id} has no predictions file under {store.root} "
                            f"({rec.predictions_file or 'none recorded'})")
    return json.loads(path.read_text())


def command(args) -> int:
    """`python -m berteval disagree ...`: the counts line, then one line per disagreeing example."""
    store = Store(args.results)
    records, problems = store.read(args.task)
    pooling_a, layer_a = parse_head(args.a, args.layer)
    pooling_b, layer_b = parse_head(args.b, args.layer)
    a = find(records, args.model, pooling_a, layer_a, args.seed, args.regime)
    b = find(records, args.model_b or args.model, pooling_b, layer_b, args.seed, args.regime_b or args.regime)
    d = compare(args.task, a, b, store.root, args.data_dir)
    lines = d.lines(args.limit)
    print(lines[0])
    for line in lines[1:]:
        print(line)
    from .stats import mcnemar_exact_p

    # The records test heads of one model against each other; across models (or regimes) this is the only test.
    p = mcnemar_exact_p(len(d.a_only), len(d.b_only))
    print(f"exact McNemar test (two-sided) on these counts: p = {p:.3g}", file=sys.stderr)
    if d.note:
        print(f"note: {d.note}", file=sys.stderr)
    return 0


def add_arguments(p) -> None:
    p.add_argument("--task", required=True, help="a classification task (sst2, nsp, mrpc, rte, qnli) or squad")
    p.add_argument("--model", default="default", help="as --model of run: default, default+nsp-pooler, or a model id")
    p.add_argument("--a", required=True, help="the first head: POOLING or POOLING@LAYER (e.g. mean, cls@5; span for SQuAD)")
    p.add_argument("--b", required=True, help="the second head, same form")
    p.add_argument("--seed", type=int, default=0, help="the seed both records share (default 0)")
    p.add_argument("--regime", default="probe", help="probe (default), finetune or pretrained")
    p.add_argument("--regime-b", default=None, help="the second head's regime when it differs (e.g. SQuAD probe vs finetune)")
    p.add_argument("--model-b", default=None, help="the second head's model when it differs (e.g. wiki-bert-mini against "
                                                  "wiki-bert-mini-nonsp: the same examples, two models)")
    p.add_argument("--layer", type=int, default=-1, help="hidden-state layer of both heads (default -1, the last)")
    p.add_argument("--limit", type=int, default=None, help="show at most N examples of each kind (default: all)")
    p.add_argument("--data-dir", default=None, help="data folder for the examples' texts (default $BERTEVAL_DATA)")
    p.add_argument("--results", default=None, help="results folder (default $BERTEVAL_RESULTS, else the committed one)")
