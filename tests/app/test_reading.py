"""The page says what it did to the input: a sentence (or pair) longer than the head's max length is
cut, and the answer says how much was read. Before, a 900-character review ending "terrible" and the
same review ending "wonderful" got the identical P(negative), without a word."""

from __future__ import annotations

import sys

import pytest

from berteval import models
from berteval.serve import reading

from conftest import REPO

LONG = ("the movie was very dull and the plot was poor and the acting was bad and " * 12).strip()


@pytest.fixture(scope="module")
def tok(tiny_models):
    return models.load(str(tiny_models["pretraining"])).tokenizer


def test_a_sentence_within_the_limit_is_read_whole(tok):
    r = reading.measure(tok, "good movie", 16)
    assert (r.read, r.total, r.truncated, r.note()) == (4, 4, False, "")


def test_a_long_sentence_says_how_much_was_read(tok):
    r = reading.measure(tok, LONG, 16)
    total = len(tok(LONG)["input_ids"])
    assert r.read == 16 and r.total == total > 16
    assert r.note().startswith(f"read the first 16 of {total} tokens (the limit)")
    assert r.note().endswith(f"the last {total - 16} tokens were not read")
    if r.chars:  # a fast tokenizer also says where in the text the reading stopped
        read_text = LONG[: r.chars[0]]
        assert r.chars[1] == len(LONG) and len(tok(read_text)["input_ids"]) == 16


def test_a_long_pair_says_which_sentence_lost_what(tok):
    r = reading.measure(tok, (LONG, "good movie"), 24)
    words_a = len(tok(LONG, add_special_tokens=False)["input_ids"])
    # longest-first: only the long sentence A is cut; [CLS] A [SEP] good movie [SEP] = 24 tokens
    assert r.read == 24 and r.total == words_a + 2 + 3 and r.lost == (words_a - 19, 0)
    assert r.note() == f"read 24 of {r.total} tokens (the limit); not read: the last {words_a - 19} tokens of sentence A"
    both = reading.measure(tok, (LONG, LONG), 24)
    assert all(n > 0 for n in both.lost) and "sentence A and the last" in both.note()
    assert reading.measure(tok, ("good", "movie"), 24).note() == ""


# --- the page (the embedded default model and the committed heads, as the app serves them) --------------

REVIEW = ("This film is a long, meandering piece about a family in a small town who spend their days talking "
          "about the weather, the neighbours and the price of bread. ") * 6


def test_unknown_word_pieces_are_counted_and_said_when_they_are_most_of_the_input(tok):
    r = reading.measure(tok, "😡💩", 16)  # one word the vocabulary has no piece for: one [UNK]
    assert (r.pieces, r.unknown, r.mostly_unknown) == (1, 1, True)
    assert r.unknown_note().startswith("mostly unknown to this model: the one word piece it read is [UNK]")
    pair = reading.measure(tok, ("😡 good", "💩 ☃"), 16)
    assert (pair.pieces, pair.unknown) == (4, 3) and "3 of the 4 word pieces it read are [UNK]" in pair.unknown_note()
    fine = reading.measure(tok, "good movie 😡", 16)
    assert (fine.pieces, fine.unknown, fine.unknown_note()) == (3, 1, "")  # one of three: not "mostly"


@pytest.fixture(scope="module")
def app():
    pytest.importorskip("gradio", reason="gradio is not installed: pip install -r requirements.txt")
    sys.path.insert(0, str(REPO))
    import app

    return app


def test_classify_says_the_review_was_cut(app):
    outs = [app.classify("default", REVIEW + ending, "mean") for ending in ("It is terrible.", "It is wonderful.")]
    assert outs[0][0] == outs[1][0]  # the endings were never read: the same probabilities ...
    for _, about, _, box in outs:  # ... and now the page says why
        assert "Cut to fit: read the first 128 of" in about and "were not read" in about and not box.get("visible")
    _, about, _, _ = app.classify("default", "A gorgeous, witty, seductive movie.", "mean")
    assert "Cut to fit" not in about


def test_next_sentence_and_inside_say_what_they_read(app):
    label, about, table, box = app.next_sentence("default", REVIEW, "They were fine.")
    assert "Cut to fit: read 128 of" in about and "of sentence A" in about and "sentence B" not in about
    report, heads, chart, box = app.look_inside("default", REVIEW)
    assert "Cut to fit: read the first 128 of" in report
    report, heads, chart, box = app.look_inside("default", "The cat sat on the mat.")
    assert "Cut to fit" not in report
