"""The second generation's NSP pairs (berteval.pretrain.pairs), the cue audit (cues) and the deletion test (edits).

Synthetic documents: sentences of distinct word ids, each ending with the id of "." (as real text does), so B's
last token says whether B ends a sentence, the first generation's cue."""

from __future__ import annotations

import numpy as np
import pytest

from berteval.pretrain import segments
from berteval.pretrain import cues, edits, pairs
from berteval.seeds import numpy_rng

STOP, UNK, WORDS = 5, 1, 1000  # "." and [UNK] ids; words are ids >= 1000


class _Vocab:
    """What the audit reads of a tokenizer: the vocabulary and the [UNK] id."""

    unk_token_id = UNK

    def __init__(self, size: int):
        self.vocab = {f"w{i}": i for i in range(size)}
        self.vocab.update({".": STOP, "[UNK]": UNK, "##x": 7})

    def get_vocab(self):
        return self.vocab


class _Docs(list):
    """Documents with paragraph starts (every 4th sentence opens one), as FlatDocuments gives them."""

    def paragraph_starts(self, d: int) -> list[bool]:
        return [k % 4 == 0 for k in range(len(self[d]))]


def _documents(n_docs: int = 300, seed: int = 0, sentences: tuple[int, int] = (8, 40)) -> _Docs:
    rng = np.random.default_rng(seed)
    docs, next_id = _Docs(), WORDS
    for _ in range(n_docs):
        doc = []
        for _ in range(int(rng.integers(*sentences))):
            n = int(rng.integers(4, 30))
            doc.append(list(range(next_id, next_id + n - 1)) + [STOP])
            next_id += n - 1
        docs.append(doc)
    return docs


def _pairs(docs, max_tokens: int, seed: int = 0):
    return list(pairs.one_pass(docs, max_tokens, pairs.SHORT_SEQ_PROB, numpy_rng(seed, "segments"),
                               pairs.PairStats()))


def _sentences_of(tokens) -> int:
    return sum(t == STOP for t in tokens)


def test_both_labels_take_whole_sentences_and_one_truncation():
    docs = _documents()
    built = _pairs(docs, 125)
    labels = [p.label for p in built]
    assert 0.45 < labels.count(pairs.IS_NEXT) / len(built) < 0.55
    assert max(p.length for p in built) <= 128
    ends = {lab: np.mean([p.tokens_b[-1] == STOP for p in built if p.label == lab]) for lab in (0, 1)}
    # One rule for both labels: B ends a sentence about as often whatever the label (the first generation: 45% vs 3%)
    assert abs(ends[0] - ends[1]) < 0.05, ends
    for p in _pairs(docs, 10_000):  # nothing truncated: every B is whole sentences, A too
        assert p.tokens_a[-1] == STOP and p.tokens_b[-1] == STOP
        if p.label == pairs.IS_NEXT:
            assert p.tokens_b[0] == p.tokens_a[-2] + 1  # the actual next sentence (word ids run on in a document)


def test_notnext_never_starts_at_a_documents_first_sentence():
    docs = _documents()
    firsts = {doc[0][0] for doc in docs}
    assert not any(p.tokens_b[0] in firsts for p in _pairs(docs, 10_000) if p.label == pairs.NOT_NEXT)


def test_notnext_b_opens_a_paragraph_exactly_when_the_isnext_b_would():
    docs = _documents(300, sentences=(40, 200))
    built = _pairs(docs, 125)
    share = {lab: np.mean([p.b_paragraph_start for p in built if p.label == lab]) for lab in (0, 1)}
    assert abs(share[0] - share[1]) < 0.02, share


def test_no_b_runs_out():
    docs = _documents()
    stats = pairs.PairStats()
    built = list(pairs.one_pass(docs, 125, 0.0, numpy_rng(0, "segments"), stats))
    assert stats.b_ran_out == {"IsNext": 0, "NotNext": 0} and stats.no_continuation > 0
    assert all(p.length == 128 for p in built)  # every pair full: the same truncation for both labels


def test_pairs_are_seeded():
    docs = _documents()
    assert _pairs(docs, 61, seed=1) == _pairs(docs, 61, seed=1) != _pairs(docs, 61, seed=2)


# slow: two 5-fold cue audits (about 16 CPU s)
@pytest.mark.slow
def test_the_audit_passes_the_new_pairs_and_catches_the_first_generations_cue():
    docs = _documents(300, sentences=(40, 200))  # articles of ~100 sentences, as Wikipedia's: ~6,000 pairs
    vocab = _Vocab(max(t for doc in docs for s in doc for t in s) + 1)
    new = _pairs(docs, 125)
    verdict = cues.audit(new, [p.label for p in new], vocab)
    assert verdict["passed"], verdict
    assert verdict["classifier_5fold_accuracy"] <= cues.CLASSIFIER_LIMIT

    class _Old:  # the first generation's builder: NotNext B cut at the continuation's exact token count
        def __init__(self, x):
            self.tokens_a, self.tokens_b, self.label = x.tokens_a, x.tokens_b, x.label
            self.a_paragraph_start = self.b_paragraph_start = False

    old = [_Old(x) for x in segments._one_pass(docs, 125, 0.1, numpy_rng(0, "segments"), segments.SegmentStats(),
                                               match_length=True)]
    caught = cues.audit(old, [p.label for p in old], vocab)
    assert not caught["passed"] and caught["strongest_single_feature"] in ("b_ends_sentence", "b_last"), caught
    assert caught["b_ends_sentence_share"]["IsNext"] > caught["b_ends_sentence_share"]["NotNext"] + 0.2


def test_single_feature_rules():
    y = np.array([0, 0, 0, 1, 1, 1] * 50)
    assert cues._threshold_rule(np.array([1, 2, 3, 4, 5, 6] * 50, dtype=float), y) == 1.0
    assert cues._threshold_rule(np.array([6, 5, 4, 3, 2, 1] * 50, dtype=float), y) == 1.0  # either direction
    assert cues._threshold_rule(np.ones(300), y) == 0.5
    assert cues._majority_rule(np.array([0, 1, 0, 1, 0, 1] * 50), y) == pytest.approx(4 / 6)


def test_the_audit_refuses_too_few_pairs():
    with pytest.raises(ValueError, match="at least 50"):
        cues.audit([], [], _Vocab(10))


@pytest.mark.parametrize("b, how, want", [
    ("It rained all day.", "stop_removed", "It rained all day"),
    ('He said "no."', "stop_removed", 'He said "no'),
    ("no stop here", "stop_removed", None),
    ("one two three four five six", "cut", "one two three four"),
    ("one two three four five six.", "cut_stop_added", "one two three four."),
    ("too short.", "cut", None),
])
def test_edits_of_b(b, how, want):
    assert edits.edit(b, how) == want


def test_deletion_test_on_a_tiny_nsp_head(tiny_models):
    from transformers import AutoModelForPreTraining, AutoTokenizer

    folder = str(tiny_models["pretraining"])
    model = AutoModelForPreTraining.from_pretrained(folder, local_files_only=True)
    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    pairs_ = [("the cat sat on the mat.", "then it slept for a while.", 0),
              ("prices rose again in may.", "the river froze over in a week.", 1)] * 3
    result = edits.deletion_test(lambda pairs: edits.p_is_next(model, tok, pairs), pairs_)
    assert result["IsNext"]["as_given"]["n"] == 3 and result["IsNext"]["stop_removed"]["n"] == 3
    assert 0.0 <= result["IsNext"]["as_given"]["mean_p_is_next"] <= 1.0
    assert "| IsNext | stop_removed | 3 |" in edits.markdown(result)


def test_the_deletion_test_command_takes_a_model_name_and_refuses_an_untrained_head(tiny_models, tmp_path,
                                                                                      capsys):
    import json

    from conftest import WORDS

    rng = np.random.default_rng(0)
    words = [w for w in WORDS if w != "."]
    sentence = lambda: " ".join(rng.choice(words, 6)) + "."  # noqa: E731
    dev = {"version": "1.1", "data": [{"title": f"t{k}", "paragraphs": [
        {"context": " ".join(sentence() for _ in range(5)), "qas": []}]} for k in range(4)]}
    (tmp_path / "squad").mkdir()
    (tmp_path / "squad" / "dev-v1.1.json").write_text(json.dumps(dev))
    assert edits.main([str(tiny_models["pretraining"]), "--data-dir", str(tmp_path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["IsNext"]["as_given"]["n"] > 0 and result["IsNext"]["stop_removed"]["n"] > 0
    assert "stop_removed_drop_on_true_pairs" in result and result["model"]
    assert edits.main([str(tiny_models["base"]), "--data-dir", str(tmp_path)]) == 2
    assert "no pretrained next-sentence (NSP) head" in capsys.readouterr().err
