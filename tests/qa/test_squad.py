"""Span QA: official EM/F1 on hand-made cases, decoding on a hand-built fixture, doc-stride
features that map answers back to their exact text, the regimes end to end on a tiny
model, and bad input."""

import json
import time

import numpy as np
import pytest

from berteval import models, records, runs
from berteval.metrics import squad as squad_metrics
from berteval.qa import QASettings
from berteval.qa import inference as qa
from berteval.errors import BertevalError
from berteval.qa.decode import best_spans
from berteval.qa.windows import make_windows
from berteval.tasks import get
from conftest import WORDS, squad_spec, tiny_context


# --- metrics -------------------------------------------------------------------------------

def test_normalisation_makes_the_eiffel_tower_an_exact_match():
    assert squad_metrics.normalize_answer("The Eiffel Tower!") == "eiffel tower"
    assert squad_metrics.exact_match("The Eiffel Tower!", "eiffel tower") == 1.0
    assert squad_metrics.exact_match("an apple", "A  apple.") == 1.0
    assert squad_metrics.exact_match("theatre", "atre") == 0.0  # articles go only as whole words


def test_f1_partial_overlap_by_hand():
    # pred tokens: [denver, broncos, team]; gold: [denver, broncos] -> P = 2/3, R = 1, F1 = 0.8
    assert squad_metrics.f1("the Denver Broncos team", "Denver Broncos") == pytest.approx(0.8)
    assert squad_metrics.f1("Carolina", "Denver Broncos") == 0.0
    assert squad_metrics.f1("", "") == 1.0 and squad_metrics.f1("x", "") == 0.0


def test_score_takes_max_over_golds_and_averages_on_0_100():
    golds = {"q1": ["Denver Broncos", "Broncos"], "q2": ["Santa Clara"]}
    got = squad_metrics.score({"q1": "broncos", "q2": "Levi's Stadium"}, golds)
    assert got == {"exact_match": 50.0, "f1": 50.0}
    assert squad_metrics.score({}, golds) == {"exact_match": 0.0, "f1": 0.0}  # a missing answer scores 0


# --- decoding --------------------------------------------------------------------------------

CTX = "Paris is big. Lyon is small."
# 8 token slots per window: [CLS] q [SEP] then context tokens with their character spans, [SEP]
W1 = [None, None, None, (0, 5), (6, 8), (9, 12), (12, 13), None]
W2 = [None, None, None, (14, 18), (19, 21), (22, 27), (27, 28), None]


def test_span_outside_context_never_chosen():
    s = np.array([9.0, 8.0, 0, 1.0, 0, 0, 0, 7.0])  # [CLS], the question and [SEP] score highest
    e = np.array([9.0, 8.0, 0, 1.0, 0, 0, 0, 7.0])
    best = best_spans([s], [e], [W1], CTX)[0]
    assert (best.start_token, best.end_token) == (3, 3) and best.text == "Paris"


def test_end_before_start_never_chosen_and_length_capped():
    s = np.array([0, 0, 0, 0, 0, 5.0, 0, 0])  # best start: token 5 ("big")
    e = np.array([0, 0, 0, 6.0, 0, 0, 1.0, 0])  # best end: token 3 ("Paris"), before the start
    cands = best_spans([s], [e], [W1], CTX)
    assert all(c.end_token >= c.start_token for c in cands)
    assert cands[0].text == "big."
    capped = best_spans([np.array([0, 0, 0, 9.0, 0, 0, 0, 0])], [np.array([0, 0, 0, 0, 0, 0, 9.0, 0])], [W1], CTX,
                        max_answer_length=2)
    assert all(c.end_token - c.start_token + 1 <= 2 for c in capped)
    assert capped[0].text != "Paris is big."


def test_answer_in_second_window_found_with_offsets_and_probabilities():
    s1, e1 = np.zeros(8), np.zeros(8)
    s2, e2 = np.zeros(8), np.zeros(8)
    s2[3], e2[5] = 4.0, 4.0  # "Lyon is small" lives in window 2
    cands = best_spans([s1, s2], [e1, e2], [W1, W2], CTX, n_best=5)
    best = cands[0]
    assert best.window == 1 and best.text == "Lyon is small" and CTX[best.start_char:best.end_char] == best.text
    assert len(cands) == 5 and sum(c.probability for c in cands) == pytest.approx(1.0)
    assert [c.score for c in cands] == sorted((c.score for c in cands), reverse=True)


def test_window_without_context_gives_no_candidates():
    assert best_spans([np.ones(3)], [np.ones(3)], [[None, None, None]], CTX) == []


# --- features --------------------------------------------------------------------------------

def test_every_training_answer_maps_back_to_its_text_across_windows(tiny_models):
    tok = models.load(str(tiny_models["pretraining"])).tokenizer
    rng = np.random.default_rng(0)
    contexts = [tiny_context(rng, 60) for _ in range(6)]
    questions, starts, texts = [], [], []
    for i, c in enumerate(contexts):
        words = c.split(" ")
        k = int(rng.integers(0, len(words) - 3))
        text = " ".join(words[k:k + 2])
        starts.append(len(" ".join(words[:k])) + (1 if k else 0))
        texts.append(text)
        questions.append("what is the story")
        assert c[starts[-1]:starts[-1] + len(text)] == text
    w = make_windows(tok, questions, contexts, max_length=32, doc_stride=8, answer_starts=starts, answer_texts=texts)
    assert len(w) > len(contexts)  # long contexts were cut into several windows
    found = set()
    for i in range(len(w)):
        s, e = int(w.start_positions[i]), int(w.end_positions[i])
        if s == 0:
            assert e == 0  # the answer is not whole in this window: label points at [CLS]
            continue
        ex = int(w.example_index[i])
        assert contexts[ex][w.offsets[i][s][0]:w.offsets[i][e][1]] == texts[ex]
        found.add(ex)
    assert found == set(range(len(contexts)))  # every answer is whole in some window


def test_empty_question_or_context_is_a_clear_error(tiny_models):
    tok = models.load(str(tiny_models["pretraining"])).tokenizer
    with pytest.raises(BertevalError, match="non-empty"):
        make_windows(tok, ["  "], ["good movie"])
    with pytest.raises(BertevalError, match="non-empty"):
        make_windows(tok, ["what"], [""])


# --- end to end on a tiny model --------------------------------------------------------------

@pytest.mark.parametrize("regime", ["probe", "finetune"])
def test_trained_regimes_write_records_predictions_and_resume(regime, tiny_models, tiny_squad_qa, tmp_path):
    rep = runs.run(squad_spec(tiny_models["pretraining"], tiny_squad_qa, tmp_path, regime))
    rec = rep.written[0]
    assert rec.task == "squad" and rec.pooling == "span" and rec.regime == regime and rec.n_eval == 9
    assert set(rec.metrics) == {"exact_match", "f1"} and 0 <= rec.metrics["f1"] <= 100
    assert rec.n_train == 18 and rec.config["train_source"] == "train-subset.json"
    preds = json.loads((tmp_path / rec.predictions_file).read_text())
    assert set(preds) == {f"d{a}-{q}" for a in range(3) for q in range(3)}  # the official format: id -> text
    assert (tmp_path / "predictions" / "squad" / "nbest" / f"{rec.run_id}.json").is_file()
    if regime == "finetune":
        assert (tmp_path / rec.config["adapter_dir"] / "adapter_model.safetensors").is_file()
    assert records.read_records([tmp_path / "squad.jsonl"])[1] == []
    again = runs.run(squad_spec(tiny_models["pretraining"], tiny_squad_qa, tmp_path, regime))
    assert again.written == [] and again.skipped == [rec.run_id]


def test_finetuned_adapter_reloads_with_the_same_answers(tiny_models, tiny_squad_qa, tmp_path):
    rec = runs.run(squad_spec(tiny_models["pretraining"], tiny_squad_qa, tmp_path, "finetune")).written[0]
    model = qa.load_adapter(tmp_path / rec.config["adapter_dir"])
    preds = json.loads((tmp_path / rec.predictions_file).read_text())
    data = get("squad").load(tiny_squad_qa)
    for qid, (question, context) in list(zip(data.eval.ids, data.eval.texts))[:3]:
        got = qa.answer(model, question, context, QASettings(max_length=32, doc_stride=8))
        assert got.nbest[0].text == preds[qid]
    assert "LoRA" in model.source


def test_pretrained_regime_refuses_a_checkpoint_without_qa_head(tiny_models, tiny_squad_qa, tmp_path):
    with pytest.raises(BertevalError, match="no trained QA head.*random"):
        runs.run(squad_spec(tiny_models["pretraining"], tiny_squad_qa, tmp_path, "pretrained"))


def test_pretrained_regime_scores_a_real_qa_head(tiny_squad_qa, tmp_path):
    from transformers import BertForQuestionAnswering

    from conftest import _tokenizer, tiny_config

    folder = tmp_path / "qa_model"
    folder.mkdir()
    _tokenizer(folder).save_pretrained(folder)
    BertForQuestionAnswering(tiny_config()).save_pretrained(folder)
    rec = runs.run(squad_spec(folder, tiny_squad_qa, tmp_path / "out", "pretrained")).written[0]
    assert rec.regime == "pretrained" and rec.n_train == 0 and rec.n_eval == 9


def test_no_plausible_answer_and_a_20000_character_context(tiny_models):
    m = models.load(str(tiny_models["pretraining"]))
    model = qa.head_model(m)
    qa_model = qa.QAModel(model, m.tokenizer, "tiny")
    got = qa.answer(qa_model, "what is the plot", "sun rain cat dog", QASettings(max_length=32, doc_stride=8))
    assert got.nbest and np.isfinite(got.nbest[0].score)  # the best span and its score, never a crash
    long_context = " ".join(["the cat was very fun and the dog was dull"] * 460)[:20_000]
    t0 = time.perf_counter()
    got = qa.answer(qa_model, "what is the plot", long_context, QASettings(max_length=64, doc_stride=16))
    assert got.n_windows > 50 and got.nbest[0].text == long_context[got.nbest[0].start_char:got.nbest[0].end_char]
    assert time.perf_counter() - t0 < 60


def test_the_full_train_set_is_a_choice_with_its_own_checksum(tmp_path):
    """--train-set full reads the reconstructed train file with every ambiguous answer moved by the offset rule;
    the default keeps the subset (and the committed records' ids)."""
    import json

    from berteval.tasks import squad

    def article(title, context, qas):
        return {"title": title, "paragraphs": [{"context": context, "qas": qas}]}

    ctx = "the cat sat on the mat. The dog sat on the rug near the cat."
    q = {"id": "q", "question": "Where did the dog sit near the cat?", "answers": [{"text": "the cat",
                                                                                   "answer_start": 0}]}
    (tmp_path / "squad").mkdir()
    dev = {"data": [article("D", ctx, [{"id": "d", "question": "Who sat?", "answers": [{"text": "the cat",
                                                                                       "answer_start": 0}]}])]}
    (tmp_path / "squad" / "dev-v1.1.json").write_text(json.dumps(dev))
    other = {"id": "s", "question": "What sat?", "answers": [{"text": "The dog", "answer_start": 24}]}
    (tmp_path / "squad" / "train-subset.json").write_text(json.dumps({"data": [article("S", ctx, [other])]}))
    (tmp_path / "squad" / squad.RECONSTRUCTED).write_text(json.dumps({"data": [article("T", ctx, [q, other])]}))
    sub, full = squad.load(tmp_path), squad.load(tmp_path, train_set="full")
    assert len(sub.train) == 1 and len(full.train) == 2 and sub.data_sha256 != full.data_sha256
    gold = full.train.labels[0]
    assert gold.texts == ("the cat",) and gold.starts == (ctx.rindex("the cat"),)  # the occurrence near "dog"
    assert "1 of 1 ambiguous answers moved" in full.details["train_source"]
