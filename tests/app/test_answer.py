"""The Answer tab's promises: one n-best entry per answer text, the head that answers named with its
estimate (the k-fold demo head before an official-protocol adapter), a checkpoint's own QA head, the
Encoder box's hub suggestions, and one context limit said alike by the page and the docs."""

from __future__ import annotations

import dataclasses
import itertools
import sys

import numpy as np
import pytest

from berteval import models, records, serve
from berteval.qa import DEFAULTS
from berteval.regimes import kfold
from berteval.qa.decode import best_spans
from berteval.serve import qa as serve_qa
from berteval.store import Store
from conftest import REPO, docs_text

# --- one entry per answer ----------------------------------------------------------------------

PARA = "Rollo came from Denmark."
REPEATED = " ".join([PARA] * 8)


def _windows_over(context: str, per_window: int = 2):
    """Character spans of each word, cut into windows of `per_window` paragraphs (question slots first)."""
    words, pos = [], 0
    for w in context.split(" "):
        words.append((pos, pos + len(w)))
        pos += len(w) + 1
    n = len(PARA.split(" "))
    return [[None, None, *words[i:i + per_window * n], None] for i in range(0, len(words), per_window * n)]


def test_a_repeated_paragraph_gives_each_answer_once_with_its_best_score():
    offsets = _windows_over(REPEATED)
    starts, ends = [], []
    for w, offs in enumerate(offsets):  # every copy of "Denmark." scores high, a later window slightly higher
        s, e = np.zeros(len(offs)), np.zeros(len(offs))
        for t, o in enumerate(offs):
            if o is not None and REPEATED[o[0]:o[1]] == "Denmark.":
                s[t], e[t] = 5.0 + w, 5.0 + w
        starts.append(s)
        ends.append(e)
    cands = best_spans(starts, ends, offsets, REPEATED)
    texts = [c.text for c in cands]
    assert len(texts) == len(set(texts))  # eight copies of the paragraph, one "Denmark." in the list
    assert texts[0] == "Denmark." and cands[0].score == 2 * (5.0 + len(offsets) - 1)  # the best copy's score
    assert sum(c.probability for c in cands) == pytest.approx(1.0)


def _brute_force_best(starts, ends, offsets, context, max_len=DEFAULTS.max_answer_length):
    best = None
    for w, (s, e, offs) in enumerate(zip(starts, ends, offsets)):
        ctx = [t for t, o in enumerate(offs) if o is not None]
        for a, b in itertools.product(ctx, ctx):
            if a <= b < a + max_len and (best is None or s[a] + e[b] > best[0]):
                best = (s[a] + e[b], context[offs[a][0]:offs[b][1]])
    return best


@pytest.mark.parametrize("seed", range(20))
def test_the_top_answer_is_the_best_span_whatever_the_duplicates(seed):
    """Why SQuAD records keep their meaning: removing lower-scored copies of a text never changes the top one."""
    rng = np.random.default_rng(seed)
    offsets = _windows_over(REPEATED)
    starts = [rng.normal(size=len(o)).round(1) for o in offsets]  # rounded: ties happen
    ends = [rng.normal(size=len(o)).round(1) for o in offsets]
    top = best_spans(starts, ends, offsets, REPEATED)[0]
    score, _ = _brute_force_best(starts, ends, offsets, REPEATED)
    assert top.score == pytest.approx(score)
    texts = [c.text for c in best_spans(starts, ends, offsets, REPEATED)]
    assert len(texts) == len(set(texts))


# --- which head answers --------------------------------------------------------------------------

def _record(run_id: str, split: str, regime: str, n_train: int, f1: float, config: dict) -> records.RunRecord:
    ident = models.identify(models.DEFAULT)
    return records.RunRecord(
        schema_version=records.SCHEMA_VERSION, run_id=run_id, timestamp="2026-01-01T00:00:00+00:00",
        model=ident.model_id, model_revision=ident.revision, task="squad", task_version="1", data_sha256="0" * 64,
        split=split, pooling="span", regime=regime, layer=-1, seed=0, metrics={"exact_match": f1 - 12, "f1": f1},
        main_metric="f1", n_train=n_train, n_eval=10570, config=config, versions={}, git_commit="x", device="cpu",
        dtype="fp32", wall_s=1.0)


def test_the_kfold_demo_head_is_served_before_the_official_adapter_and_named_with_its_estimate(tmp_path):
    store = Store(tmp_path)
    for rel in ("adapters/squad/official", "adapters/squad/demo"):
        (tmp_path / rel).mkdir(parents=True)
    official = _record("official", "validation", "finetune", 3939, 54.1, {"adapter_dir": "adapters/squad/official"})
    store.append(official)
    assert serve_qa.served_record(store).run_id == "official"
    assert "official dev EM 42.1, F1 54.1" in serve_qa.head_text(official)
    folds = [{"fold": f, "f1": 60.0 + f, "exact_match": 50.0} for f in (1, 2)]
    store.append(_record("fold1", f"{kfold.KFOLD_SPLIT} (k=2): fold 1, 24 held-out articles", "finetune-lora-plus",
                         9187, 61.0, {"kfold": {"fold": 1}}))
    demo = _record("demo", f"{kfold.KFOLD_SPLIT} (k=2)", "finetune-lora-plus", 14509, 62.5,
                   {"adapter_dir": "adapters/squad/demo", "folds": folds,
                    "training": {"trained": "LoRA adapters on every encoder linear layer + span head"}})
    store.append(demo)
    assert serve_qa.served_record(store).run_id == "demo"  # the estimate, never a fold's part
    text = serve_qa.head_text(demo)
    for words in ("the demo head", "14,509", "2-fold cross-validation", "10,570", "EM 50.5, F1 62.5",
                  "fold 1: F1 61.0", "fold 2: F1 62.0", "not an official-dev score", "`demo`"):
        assert words in text
    (tmp_path / "adapters/squad/demo").rmdir()  # its artifact gone: back to the official adapter
    assert serve_qa.served_record(store).run_id == "official"


def test_the_head_trained_on_the_full_train_set_is_served_before_the_demo_head(tmp_path):
    """Issue 26: an official-dev figure from all 87,599 train questions beats the k-fold estimate; a full-set
    record scored on a slice of dev (--limit-eval) or without its adapter on disk is never served."""
    from berteval.tasks import squad

    store = Store(tmp_path)
    for rel in ("adapters/squad/demo", "adapters/squad/full", "adapters/squad/quick"):
        (tmp_path / rel).mkdir(parents=True)
    store.append(_record("demo", f"{kfold.KFOLD_SPLIT} (k=2)", "finetune-lora-plus", 14509, 80.0,
                         {"adapter_dir": "adapters/squad/demo", "folds": []}))
    source = f"{squad.RECONSTRUCTED} (the official train set rebuilt from the explorer pages; ids synthetic)"
    store.append(_record("quick", "validation", "finetune-lora-plus", 87599, 90.0,
                         {"adapter_dir": "adapters/squad/quick", "train_source": source, "limit_eval": 500}))
    assert serve_qa.served_record(store).run_id == "demo"  # a slice of dev is not the official figure
    full = _record("full", "validation", "finetune-lora-plus", 87599, 70.0,
                   {"adapter_dir": "adapters/squad/full", "train_source": source, "limit_eval": None,
                    "training": {"trained": "LoRA-plus words"}})
    store.append(full)
    assert serve_qa.served_record(store).run_id == "full"  # lower than the estimate, and still the one served
    text = serve_qa.head_text(full)
    for words in ("LoRA-plus words", "all 87,599 questions of the SQuAD v1.1 train set",
                  "rebuilt from the official pages", "all 10,570 questions", "EM 58.0, F1 70.0", "`full`"):
        assert words in text, words
    assert "estimate" not in text
    (tmp_path / "adapters/squad/full").rmdir()
    assert serve_qa.served_record(store).run_id == "demo"


def test_a_pre_trained_twin_answers_with_its_committed_full_train_head():
    """Issue 26 item 5: the NSP twin's SQuAD fine-tune is committed, so choosing the twin answers with it (its
    official-dev figure named, uncalibrated); never the default's head, never a refusal."""
    rec = serve_qa.served_record(Store(), "wiki-bert-mini")
    assert rec is not None and rec.model == "berteval/wiki-bert-mini" and rec.n_train == 87599
    qa_model, ans = serve.answer("wiki-bert-mini", "What did the cat eat?", "The cat ate a small grey mouse.")
    assert qa_model.run_id == rec.run_id
    assert f"F1 {rec.metrics['f1']:.1f}" in qa_model.source and "all 87,599 questions" in qa_model.source
    assert ans.nbest and serve.confidence_of(qa_model, ans).calibration is None  # calibrated for the default only


def test_a_checkpoint_with_its_own_qa_head_answers_in_the_tab(tmp_path, monkeypatch):
    pytest.importorskip("gradio")
    from transformers import BertForQuestionAnswering

    from conftest import _tokenizer, tiny_config

    sys.path.insert(0, str(REPO))
    import app

    folder = tmp_path / "tiny-squad"  # saved as a hub SQuAD checkpoint is: save_pretrained, QA head included
    folder.mkdir()
    BertForQuestionAnswering(tiny_config()).save_pretrained(folder)
    _tokenizer(folder).save_pretrained(folder)
    context = " ".join(["the cat was very fun and the dog was dull ."] * 8)
    # A local folder stands in for a hub SQuAD checkpoint: the operator's allow-list lets the page load it.
    monkeypatch.setenv("BERTEVAL_APP_MODELS", str(folder))
    highlighted, nbest, fig, about, score, whole, box = app.answer(str(folder), "what was fun ?", context)
    assert not box.get("visible") and "pretrained QA head of" in about
    assert "not calibrated here" in score  # a checkpoint's own head: its scores were never calibrated here
    assert nbest["answer"].is_unique  # the repeated sentence: each answer text once


# slow: the real QA adapter answered on fp32 and on bf16 weights (about 21 CPU s)
@pytest.mark.slow
def test_a_deployment_can_serve_answers_on_bf16_weights(tmp_path):
    """BERTEVAL_APP_DTYPE=bf16: the answer comes from the bf16 copy of the weights (the fp32 model untouched),
    close to fp32's; the page says which weights answer; any other value stops the app with what to set."""
    import os
    import subprocess

    import torch
    from transformers import BertForQuestionAnswering

    from berteval import precision
    from conftest import _tokenizer, tiny_config

    folder = tmp_path / "tiny-squad"
    torch.manual_seed(0)
    BertForQuestionAnswering(tiny_config()).save_pretrained(folder)
    _tokenizer(folder).save_pretrained(folder)
    context = "the cat was very fun and the dog was dull ."
    qa32, fp32 = serve.answer(str(folder), "what was fun ?", context)
    qa16, bf16 = serve.answer(str(folder), "what was fun ?", context, "bf16")
    assert qa16 is qa32 and next(qa32.model.parameters()).dtype == torch.float32
    assert next(precision.bf16_copy(qa32.model).parameters()).dtype == torch.bfloat16
    assert np.abs(bf16.start_logits - fp32.start_logits).max() < 0.1
    assert not np.array_equal(bf16.start_logits, fp32.start_logits)  # a different path ran
    def page(dtype):
        return subprocess.run([sys.executable, "-c", "import app; print(app.SERVING)"], cwd=REPO, capture_output=True,
                              text=True, env={**os.environ, "BERTEVAL_APP_DTYPE": dtype})

    served = page("bf16")
    assert served.returncode == 0 and "Classify and Answer on a bf16 copy of the weights" in served.stdout
    refused = page("fp16")
    assert refused.returncode != 0 and "use fp32 (the default) or bf16" in refused.stderr


def test_an_encoder_without_a_qa_head_is_refused_with_what_the_page_can_do_instead(tiny_models):
    from berteval.errors import BertevalError

    with pytest.raises(BertevalError, match=r"has no trained QA head.*no SQuAD head is committed for it\. "
                                            r"Choose 'default'.*SQuAD checkpoint") as e:
        serve_qa.demo_model(str(tiny_models["base"]))
    assert "--regime" not in str(e.value)  # the page's visitor has no command line


def test_hub_squad_checkpoints_are_suggested_only_where_the_hub_answers(monkeypatch):
    from huggingface_hub import constants

    offline = serve.offline_models()
    assert serve_qa.suggested_models(offline, reachable=False) == offline
    online = serve_qa.suggested_models(offline, reachable=True)
    assert online[:len(offline)] == offline and "distilbert/distilbert-base-cased-distilled-squad" in online
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert serve.suggested_models() == offline


# --- limits, said once ---------------------------------------------------------------------------

def test_the_page_and_the_readme_state_the_same_limits_and_queue():
    pytest.importorskip("gradio")
    sys.path.insert(0, str(REPO))
    import app

    limit = serve.LIMITS["context"]
    readme = docs_text()  # README.md and docs/ (the app page states the limits)
    assert f"{limit:,}" in app.QA_LIMITS and f"context {limit:,}" in app.SERVING
    assert f"contexts up to {limit:,} characters" in readme.lower()
    assert "20,000-character context is cut" not in readme  # the old claim the app never honoured
    shown = [c.get("props", {}).get("value") for c in app.build_demo().config["components"]]
    assert app.SERVING in shown and any(app.QA_LIMITS in str(v) for v in shown)
    assert f"{app.CONCURRENCY} requests at a time" in app.SERVING and f"{app.QUEUE_SIZE} waiting" in app.SERVING


def test_before_the_demo_head_the_better_committed_recipe_answers(tmp_path):
    store = Store(tmp_path)
    for rel in ("adapters/squad/lora", "adapters/squad/plus"):
        (tmp_path / rel).mkdir(parents=True)
    store.append(_record("lora", "validation", "finetune", 3939, 54.1, {"adapter_dir": "adapters/squad/lora"}))
    plus = _record("plus", "validation", "finetune-lora-plus", 3939, 56.5,
                   {"adapter_dir": "adapters/squad/plus", "training": {"trained": "LoRA-plus words"}})
    store.append(plus)
    store.append(_record("full", "validation", "finetune-full", 3939, 57.2, {}))  # no artifact: never served
    assert serve_qa.served_record(store).run_id == "plus"
    assert serve_qa.head_text(plus).startswith("LoRA-plus words, fine-tuned on the 3,939-question")


# --- is the answer in this text at all: the calibrated confidence -------------------------------------------

def test_calibration_separates_own_paragraphs_from_other_articles_and_is_filed_under_its_head(tiny_models, tmp_path):
    from berteval.qa import confidence as qa_confidence
    from berteval.qa import inference
    from berteval.serve import confidence
    from berteval.tasks.base import Split

    loaded = models.load(str(tiny_models["pretraining"]))
    tiny = inference.QAModel(inference.head_model(loaded), loaded.tokenizer, "tiny head", run_id="tiny")
    texts, groups = [], []
    for article in range(6):
        context = f"the {'cat dog sun rain movie film'.split()[article]} was good and the plot was bad ."
        texts += [("what was good ?", context), ("what was bad ?", context)]
        groups += [f"article {article}"] * 2
    split = Split("questions", texts, [None] * len(texts), groups=groups)
    cal = qa_confidence.calibrate(tiny, "tiny", split, inference.fitted(DEFAULTS, tiny.model), per_half=4,
                                  source="tiny articles")
    assert cal.n_questions == 4 and 0.0 <= cal.auc_margin <= 1.0 and 0.0 <= cal.precision <= 1.0
    assert cal.questions == "tiny articles" and cal.head_run_id == "tiny"
    # Filed beside the head's record; the page reads it for that head only.
    store = Store(tmp_path)
    store.write_json(confidence.calibration_file("tiny"), cal.to_json())
    assert confidence.load("tiny", store)["threshold"] == cal.threshold
    assert confidence.load("another", store) is None and confidence.load(None, store) is None
    assert qa_confidence.verdict(None, 3.0, 0.0) is None
    assert qa_confidence.verdict({"threshold": 4.0}, 3.0, 0.0) is False
    assert qa_confidence.verdict({"threshold": 4.0}, 5.0, 0.0) is True


def test_calibration_asks_questions_the_served_head_never_trained_on(monkeypatch):
    from berteval.errors import BertevalError
    from berteval.serve import confidence
    from berteval.tasks import squad

    official = _record("official", "validation", "finetune", 3939, 54.1, {"train_source": "train-subset.json"})
    demo = _record("demo", f"{kfold.KFOLD_SPLIT} (k=2)", "finetune-lora-plus", 14509, 62.5,
                   {"folds": [], "train_source": "train-subset.json"})
    everything = _record("all", f"{kfold.KFOLD_SPLIT} (k=2)", "finetune-lora-plus", 98169, 70.0,
                         {"folds": [], "train_source": squad.RECONSTRUCTED})
    def load(data_dir, train_set="subset"):
        from berteval.tasks.base import Split, TaskData

        train = Split("train", [("q", "c")] * 3, [None] * 3, groups=["seen", "new", "new"]) if train_set == "full" \
            else Split("train", [("q", "c")], [None], groups=["seen"])
        return TaskData(train=train, eval=Split("dev", [("q", "c")], [None], groups=["dev"]), source="test",
                        data_sha256="0")

    from berteval import tasks

    monkeypatch.setitem(tasks.TASKS, "squad", dataclasses.replace(tasks.TASKS["squad"], load=load))
    split, words = confidence.held_out_questions(official, None)
    assert split.groups == ["dev"] and "dev" in words  # trained on train: dev is unseen
    split, words = confidence.held_out_questions(demo, "data")
    assert split.groups == ["new", "new"] and "outside the train subset" in words  # trained on dev: train articles
    with pytest.raises(BertevalError, match="no SQuAD question here is unseen"):
        confidence.held_out_questions(everything, "data")


def test_the_readme_quotes_the_served_heads_calibration_and_its_command():
    """The README's figures are the committed calibration's, for the head the page serves (a new served head
    without its calibration, or a README left behind, fails here)."""
    from berteval.serve import confidence

    rec = serve_qa.served_record(Store())
    cal = confidence.load(rec.run_id)
    assert cal is not None, f"run: python -m berteval.serve.confidence --data-dir ../shared/data (head {rec.run_id})"
    readme = (REPO / "README.md").read_text()
    for figure in (f"ROC AUC {cal['auc_margin']:.4f}", f"precision {cal['precision']:.4f}",
                   f"recall {cal['recall']:.4f}", f"threshold **{cal['threshold']:.2f}**", rec.run_id,
                   f"{cal['n_questions']} SQuAD questions", "python -m berteval.serve.confidence --data-dir ../shared/data"):
        assert figure in readme, figure
