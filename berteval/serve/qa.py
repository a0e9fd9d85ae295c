"""The app's span-QA model, and the words that say which head answers and how good it is.

For the embedded default, the first of these that is committed with its adapter: the head trained on the
full SQuAD v1.1 train set (87,599 questions) and scored on the official dev set (issue 26: an official-dev
figure, no longer an estimate); else the demo head trained on every question of the train subset and the
official dev set, served with its k-fold estimate (`berteval.regimes.kfold`: each dev question answered by
a head that never saw its article); else the best official-protocol adapter trained on the train subset.
berteval's other
encoders (the pre-trained twins, the derived ones) the same way, where a head of theirs is committed (the twins'
full-train fine-tunes). For any other checkpoint (a hub SQuAD model such as
distilbert/distilbert-base-cased-distilled-squad, or a local folder), or one of ours without a committed head:
its own trained QA head, refused where transformers would attach a random one.
"""

from __future__ import annotations

import dataclasses

from .. import hub, models
from ..errors import BertevalError
from ..qa.inference import QAModel, head_model, load_adapter
from ..records import RunRecord
from ..regimes import kfold
from ..store import Store
from ..tasks import get, squad

# SQuAD v1.1 checkpoints with their own trained QA head, suggested in the Encoder box where the hub
# is reachable (a Space): small enough to answer on a CPU Space, each from the hub as it is.
HUB_SQUAD_MODELS = (
    "distilbert/distilbert-base-cased-distilled-squad",
    "distilbert/distilbert-base-uncased-distilled-squad",
    "csarron/bert-base-uncased-squad-v1",
)


def suggested_models(offline: list[str], reachable: bool | None = None) -> list[str]:
    """The Encoder box's choices: the offline models, then the hub SQuAD checkpoints where the hub answers."""
    if reachable is None:
        reachable = hub.reachable()
    return [*offline, *(HUB_SQUAD_MODELS if reachable else ())]


def _metrics(rec: RunRecord) -> str:
    return f"EM {rec.metrics['exact_match']:.1f}, F1 {rec.metrics['f1']:.1f}"


def estimate_text(rec: RunRecord) -> str:
    """A k-fold estimate record, in words: what trained, on what, and how it was scored."""
    folds = rec.config.get("folds", [])
    per_fold = "; ".join(f"fold {f['fold']}: F1 {f['f1']:.1f}" for f in folds)
    return (f"{rec.config.get('training', {}).get('trained', rec.regime)}, trained on all {rec.n_train:,} SQuAD "
            f"questions we have (the train subset and the official dev set). Its quality, estimated by "
            f"{len(folds)}-fold cross-validation over the dev articles (each of the {rec.n_eval:,} dev questions "
            f"answered once by a head that never saw its article): **{_metrics(rec)}** ({per_fold}; record "
            f"`{rec.run_id}`). An estimate, not an official-dev score: the leaderboard shows it apart")


def _best(found: list[RunRecord]) -> RunRecord | None:
    return max(found, key=lambda r: (r.main_value, r.run_id)) if found else None


def served_record(store: Store, name: str = models.DEFAULT) -> RunRecord | None:
    """The record behind the default model's served head, read without loading any weights: the best committed
    head trained on the full train set and scored on all of the official dev set, else the k-fold demo head
    with the best estimate, else the best official-protocol adapter (None: none of them)."""
    ident = models.identify(name)
    version = get("squad").version
    ours = [r for r in store.read("squad")[0]
            if r.model == ident.model_id and r.model_revision == ident.revision and r.task_version == version
            and r.config.get("adapter_dir") and store.has_file(r.config["adapter_dir"])]
    # A figure on a slice of dev (--limit-eval) is a quick look, not the head's official-dev score.
    full = [r for r in ours if not kfold.is_kfold(r.split) and squad.trained_on_full_train(r.config)
            and r.config.get("limit_eval") is None]
    if (found := _best(full) or _best([r for r in ours if kfold.is_estimate(r)])) is not None:
        return found
    # Before the demo head: the best committed adapter on the official protocol, whichever regime trained it
    # (store.best keeps records whose adapter is on disk: a full fine-tune or a probe keeps none).
    from ..regimes import supported

    found = [c.record for regime in supported(get("squad"))
             if (c := store.best("squad", model_id=ident.model_id, revision=ident.revision, version=version,
                                 regime=regime, artifact="adapter_dir")) is not None and not kfold.is_kfold(c.record.split)]
    return _best(found)


def head_text(rec: RunRecord) -> str:
    """Which head answers, and how good it is, in words."""
    if kfold.is_estimate(rec):
        return f"the demo head: {estimate_text(rec)}."
    trained = rec.config.get("training", {}).get("trained", "LoRA adapters + span head")
    if squad.trained_on_full_train(rec.config):
        rebuilt = " (rebuilt from the official pages)" if squad.RECONSTRUCTED in str(rec.config["train_source"]) else ""
        return (f"{trained}, fine-tuned on all {rec.n_train:,} questions of the SQuAD v1.1 train set{rebuilt}; "
                f"official dev, all {rec.n_eval:,} questions: **{_metrics(rec)}** (record `{rec.run_id}`)")
    return (f"{trained}, fine-tuned on the {rec.n_train:,}-question SQuAD train subset; official dev {_metrics(rec)} "
            f"(record `{rec.run_id}`)")


# What a visitor can do about an encoder without a QA head (the library's own advice names CLI regimes).
PAGE_ADVICE = ("Here no SQuAD head is committed for it. Choose 'default' (its committed SQuAD head answers) or, "
               "where the hub is reachable, a SQuAD checkpoint such as distilbert/distilbert-base-cased-distilled-squad.")


def _may_have_committed_head(name: str) -> bool:
    """berteval's own encoders (the default, those derived from it, the pre-trained twins) may have a head
    committed under the results; a hub id or an operator's folder answers with its checkpoint's own head."""
    return (name == models.DEFAULT or name in models.pretrained.PRETRAINED
            or models.derived.parse(name) is not None)


def demo_model(name: str = models.DEFAULT, store: Store | None = None) -> QAModel:
    store = store or Store()
    # The committed head first: the default's demo head, and a twin's fine-tune on the same recipe (issue 26
    # item 5), so choosing `wiki-bert-mini` answers with its own SQuAD head and its official-dev figure.
    rec = served_record(store, name) if _may_have_committed_head(name) else None
    if rec is None and name != models.DEFAULT:
        loaded = models.load(name)
        return QAModel(head_model(loaded, require_pretrained=True, advice=PAGE_ADVICE), loaded.tokenizer,
                       f"pretrained QA head of {loaded.model_id}, as its checkpoint ships it")
    if rec is None:
        raise BertevalError(f"no committed SQuAD adapter for {models.identify(name).model_id} under {store.root}; "
                            f"run: python -m berteval run --task squad --regime finetune --seeds 0 --data-dir "
                            f"../shared/data")
    return dataclasses.replace(load_adapter(store.inside(rec.config["adapter_dir"])), source=head_text(rec),
                               run_id=rec.run_id)


# The answer is shown in a window of its context, not in all of it: a 9,594-character context made a 5,697 px
# page with the answer 3,700 px down. The whole context stays one click away (app.py).
EXCERPT_AROUND = 400  # characters shown on each side of the answer span


def excerpt(context: str, start: int, end: int, around: int = EXCERPT_AROUND) -> tuple[str, int]:
    """(the part of `context` around the span [start, end), cut at spaces and marked "… " / " …" where cut; how
    far the excerpt's text is shifted from the context's offsets: span offsets in the excerpt are offset + these)."""
    lo, hi = max(0, start - around), min(len(context), end + around)
    if lo > 0:  # start at a word: after the first space past the cut, unless that reaches the answer
        space = context.find(" ", lo, start)
        lo = space + 1 if space != -1 else lo
    if hi < len(context):
        space = context.rfind(" ", end, hi)
        hi = space if space != -1 else hi
    head = "… " if lo > 0 else ""
    tail = " …" if hi < len(context) else ""
    return head + context[lo:hi] + tail, len(head) - lo
