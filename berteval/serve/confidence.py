"""The Answer tab's confidence, measured once per served QA head and read by the page.

`python -m berteval.serve.confidence --data-dir ../shared/data` calibrates the head the page
serves (`serve.qa.served_record`) with `berteval.qa.confidence.calibrate` and writes the result
beside the head's record, `<results>/calibration/squad-<run_id>.json`; rerun it when the served
head changes (the page then finds no file for the new head and says the score is uncalibrated).

The questions must be ones the head never trained on, or its own paragraphs score too well: SQuAD
dev for a head trained on the train set; for the demo head, which trained on dev too (the k-fold
"all" cell), the questions of the reconstructed full train set whose articles are not in the
train subset it trained on. A head that trained on every question here cannot be calibrated here.
"""

from __future__ import annotations

import argparse
import json
import time

from .. import models
from ..errors import BertevalError
from ..records import RunRecord
from ..store import Store

FOLDER = "calibration"
PER_HALF = 1000


def calibration_file(run_id: str) -> str:
    """Where a head's calibration lives, relative to the results root."""
    return f"{FOLDER}/squad-{run_id}.json"


# What differs between two runs that measured the same calibration: kept out of the comparison in `save`.
VOLATILE = ("wall_s",)


def save(store: Store, out: dict) -> tuple[str, bool]:
    """Write the calibration `out` of head `out["head_run_id"]` unless the file already holds the same one (every
    field but the VOLATILE ones equal): rerunning the README's command leaves a clone's committed file as it
    is. Returns (its path under the results root, whether it was written)."""
    rel = calibration_file(out["head_run_id"])
    if store.has_file(rel):
        try:
            before = json.loads(store.inside(rel).read_text())
        except (OSError, ValueError):  # unreadable: replaced by the new measurement
            before = None
        same = lambda d: {k: v for k, v in d.items() if k not in VOLATILE}  # noqa: E731
        if isinstance(before, dict) and same(before) == same(out):
            return rel, False
    return store.write_json(rel, out), True


def load(run_id: str | None, store: Store | None = None) -> dict | None:
    """The calibration of the head `run_id` (None: no committed file for it, or no run id)."""
    if not run_id:
        return None
    store = store or Store()
    rel = calibration_file(run_id)
    if not store.has_file(rel):
        return None
    try:
        found = json.loads(store.inside(rel).read_text())
    except (OSError, ValueError):
        return None
    return found if found.get("head_run_id") == run_id and "threshold" in found else None


def held_out_questions(rec: RunRecord, data_dir):
    """(a Split of questions the head never trained on, in words where they come from)."""
    from ..regimes import kfold
    from ..tasks import get, squad

    if not kfold.is_estimate(rec):  # trained on the train set (subset or full), scored on dev: dev is unseen
        return get("squad").load(data_dir).eval, "SQuAD v1.1 dev (official), which this head never trained on"
    if squad.trained_on_full_train(rec.config):
        raise BertevalError(f"head {rec.run_id} trained on the full train set and on dev: no SQuAD question here "
                            f"is unseen by it, so it cannot be calibrated here")
    if data_dir is None:
        raise BertevalError("the demo head trained on SQuAD dev too: its calibration reads the reconstructed train "
                            f"set (squad/{squad.RECONSTRUCTED}); pass --data-dir")
    seen = set(get("squad").load(data_dir).train.groups)  # the subset's articles
    full = get("squad").load(data_dir, train_set="full").train
    keep = [i for i, g in enumerate(full.groups) if g not in seen]
    if not keep:
        raise BertevalError("every article of the reconstructed train set is in the train subset: nothing unseen")
    split = full.subset(keep)
    return split, (f"SQuAD v1.1 train (reconstructed from the explorer pages), the {len(set(split.groups))} articles "
                   f"outside the train subset: this head trained on the subset and on dev, never on these")


def main(argv: list[str] | None = None) -> int:
    from .. import config
    from ..qa import DEFAULTS
    from ..qa.confidence import calibrate
    from ..qa.inference import fitted
    from . import qa

    parser = argparse.ArgumentParser(prog="python -m berteval.serve.confidence", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None, help="the folder holding squad/ (or BERTEVAL_DATA)")
    parser.add_argument("--out", default=None, help="the results root (default: leaderboard/results)")
    parser.add_argument("--model", default=models.DEFAULT, help="the model whose served QA head is calibrated")
    parser.add_argument("--per-half", type=int, default=PER_HALF,
                        help="questions per half (each asked of its own paragraph and of another article's)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        store = Store(config.results_root(args.out))
        rec = qa.served_record(store, args.model)
        if rec is None:
            raise BertevalError(f"no served SQuAD head for {args.model} under {store.root}")
        questions, source = held_out_questions(rec, config.data_dir(args.data_dir))
        head = qa.demo_model(args.model, store)
        start = time.monotonic()
        found = calibrate(head, rec.run_id, questions, fitted(DEFAULTS, head.model), per_half=args.per_half,
                          seed=args.seed, source=source)
        out = {**found.to_json(), "wall_s": round(time.monotonic() - start, 1),
               "command": f"python -m berteval.serve.confidence --data-dir ../shared/data --per-half {args.per_half}"
                          + (f" --model {args.model}" if args.model != models.DEFAULT else "")
                          + (f" --seed {args.seed}" if args.seed else "")}
        rel, written = save(store, out)
    except BertevalError as exc:
        parser.exit(2, f"error: {exc}\n")
    print(json.dumps(out, indent=1))
    print(f"written: {rel} under {store.root}" if written else
          f"unchanged: {rel} under {store.root} already holds this calibration (only the wall time differs); kept")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
