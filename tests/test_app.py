"""app.py without a browser: the page builds, each handler returns what its components show,
and every failure becomes a message in the page (the last output), never an exception."""

from __future__ import annotations

import re
import sys

import pandas as pd
import pytest

from conftest import REPO

pytest.importorskip("gradio", reason="gradio is not installed: pip install -r requirements.txt")
sys.path.insert(0, str(REPO))  # app.py sits at the repository root
import app  # noqa: E402

from berteval import models, serve  # noqa: E402
from berteval.qa import inference as qa  # noqa: E402
from berteval.errors import BertevalError  # noqa: E402


def status(outputs) -> str:
    box = outputs[-1]
    return box["value"] if box.get("visible") else ""


def test_the_page_builds_with_one_api_per_tab():
    page = app.build_demo()
    names = {d.api_name for d in page.fns.values() if d.api_name and d.api_visibility == "public"}
    assert {"classify", "answer", "next_sentence", "inside", "leaderboard"} <= names


def test_classify_shows_probabilities_and_the_head():
    label, about, compare, box = app.classify("default", "A gorgeous, witty, seductive movie.", "pooler")
    assert status((box,)) == ""
    assert set(label) == {"positive", "negative"} and label["positive"] + label["negative"] == pytest.approx(1.0)
    assert label["positive"] > 0.5
    assert "dev accuracy" in about and "never trained" in about  # the pooler head says what the pooler is
    assert all(f"`{h}`" in compare for h in app.HEADS)


@pytest.mark.parametrize("model, sentence, message", [
    ("default", "   ", "sentence is empty"),
    ("default", "x" * 5000, "the limit is 1,000"),
    ("./no/such/model", "fine", "does not read folders on the server"),
])
def test_bad_input_is_a_message(model, sentence, message):
    out = app.classify(model, sentence, "mean")
    assert message in status(out) and out[0] is None


def test_an_unexpected_failure_is_a_message_without_a_traceback(monkeypatch):
    def broken(name):
        raise RuntimeError("boom")

    monkeypatch.setattr(serve, "classifier", broken)
    out = app.classify("default", "fine", "mean")
    # A fixed sentence: the exception's text stays in the server log (it may name server paths).
    assert "Something went wrong on the server" in status(out) and "boom" not in status(out)
    assert "Traceback" not in status(out)


def test_answer_highlights_the_best_span_by_character_offsets(tiny_models, monkeypatch):
    loaded = models.load(str(tiny_models["pretraining"]))
    tiny = qa.QAModel(qa.head_model(loaded), loaded.tokenizer, "tiny test head")
    monkeypatch.setattr(serve, "qa_model", lambda name: tiny)
    context = "the movie was good and the plot was bad"
    highlighted, nbest, fig, about, box = app.answer("default", "what was good ?", f"  {context}  ")
    assert status((box,)) == ""
    span = highlighted["entities"][0]
    assert highlighted["text"] == context and context[span["start"]:span["end"]] == nbest.loc[0, "answer"]
    assert list(nbest.columns) == app.NBEST_COLUMNS and 1 <= len(nbest) <= app.N_BEST_SHOWN
    assert [t.name for t in fig.data][:2] == ["start logit", "end logit"]
    assert "tiny test head" in about and "one window" in about


def test_answer_without_a_qa_head_says_so(monkeypatch):
    def missing(name):
        raise BertevalError("no committed SQuAD adapter under results")

    monkeypatch.setattr(serve, "qa_model", missing)
    out = app.answer("default", "q?", "a context")
    assert "no committed SQuAD adapter" in status(out)
    assert list(out[1].columns) == app.NBEST_COLUMNS and out[1].empty  # the n-best table keeps its headers


def test_next_sentence_names_the_head_that_answers():
    label, about, box = app.next_sentence("default", "The Normans gave their name to Normandy.",
                                          "They were descended from Norse raiders.")
    assert status((box,)) == "" and label["IsNext"] + label["NotNext"] == pytest.approx(1.0)
    assert re.search(r"P\(IsNext\) = 0\.\d{3}", about) and "no pretrained next-sentence head" in about


def test_inside_bert_report():
    report, box = app.look_inside("", "The cat sat on the mat.")
    assert status((box,)) == ""
    assert "(1, 9, 384)" in report and "(1, 384)" in report and "(equal)" in report and "cosine" in report


def test_leaderboard_filters_table_and_csv():
    summary, table, csv, *rest = app.board("all", "nsp", "all", "all", "")
    figures, box = rest[:-1], rest[-1]
    assert status((box,)) == "" and "records match" in summary
    assert list(table.columns) == app.TABLE_SHOWN and set(table["task"]) == {"nsp"}
    full = pd.read_csv(csv)
    assert len(full) == len(table) and "model_revision" in full.columns  # the download keeps every column
    assert len(figures) == len(app.FIGURES) and all(hasattr(f, "to_plotly_json") for f in figures)



def test_a_hub_model_offline_is_a_clear_message(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    report, box = app.look_inside("berteval-tests/not-in-any-cache", "The cat sat on the mat.")
    assert report == "" and "Hub is not reachable" in box["value"] and "Traceback" not in box["value"]


def test_host_and_port_from_options_or_gradio_environment(monkeypatch):
    monkeypatch.delenv("GRADIO_SERVER_NAME", raising=False)
    monkeypatch.delenv("GRADIO_SERVER_PORT", raising=False)
    assert (app.options([]).host, app.options([]).port) == ("127.0.0.1", 7860)
    monkeypatch.setenv("GRADIO_SERVER_PORT", "9001")
    monkeypatch.setenv("GRADIO_SERVER_NAME", "0.0.0.0")
    assert (app.options([]).host, app.options([]).port) == ("0.0.0.0", 9001)
    assert app.options(["--port", "9002", "--host", "localhost"]).port == 9002
