"""The app end to end, in a real headless Chromium: start `python app.py`, visit every tab,
run one example in each and read what a visitor would see.

Runs with the slow tests (`python -m pytest tests -q -m slow`, which .ci/run runs after the README's
command: a server that imports torch and gradio and loads the models, then a browser, take minutes on
2 cores). CI installs Debian's chromium; Playwright's Python package drives it, Playwright's own browser
download is not used; it skips, saying why, where the browser or playwright is missing.
BERTEVAL_SCREENS=<folder> also saves a full-page screenshot of each tab there as app_<tab>.png.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO, SHARED_DATA

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-sync"]
STARTUP_S = 240  # import torch + gradio, load the default model, its heads and the QA adapter, on 2 busy cores
RESULT_MS = 60_000  # one request, on a machine that may be training at the same time

try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None

pytestmark = [
    pytest.mark.e2e,  # the page in a real browser: -m "not e2e" leaves these out
    pytest.mark.slow,  # the served page: minutes of CPU (test_space_e2e.py shares this list)
    pytest.mark.skipif(not CHROMIUM.is_file(), reason=f"{CHROMIUM} is missing: apt-get install -y chromium"),
    pytest.mark.skipif(sync_playwright is None, reason="playwright is not installed: pip install -r requirements.txt"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_app(log: Path, extra_env: dict | None = None, port: int | None = None):
    """Start `python app.py` (offline), wait until it serves, yield its URL; stop it after. The server log
    must not hold an unhandled traceback, whatever the tests did."""
    port = port or _free_port()
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1", **(extra_env or {})}
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "app.py", "--host", "127.0.0.1", "--port", str(port)], cwd=REPO,
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        _wait_until_served(url, proc, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]


def _wait_until_served(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_S
    while True:
        if proc.poll() is not None:
            pytest.fail(f"{proc.args} exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"{url} did not answer within {STARTUP_S} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory) -> Path:
    """A tiny save_pretrained BERT with no committed record and no NSP head, standing in for a hub model."""
    from conftest import save_tiny

    return save_tiny(tmp_path_factory.mktemp("stand-in") / "tiny-bert", "base")


@pytest.fixture(scope="module")
def app_url(tmp_path_factory, stand_in):
    # The operator's allow-list lets the page load the stand-in folder (a visitor names hub ids only).
    yield from serve_app(tmp_path_factory.mktemp("app") / "app.log", {"BERTEVAL_APP_MODELS": str(stand_in)})


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, app_url):
    pg = browser.new_page(viewport={"width": 1280, "height": 900})
    pg.set_default_timeout(RESULT_MS)
    expect.set_options(timeout=RESULT_MS)  # expect() has its own 5 s default
    pg.goto(app_url)
    expect(pg.get_by_role("tab", name="Classify")).to_be_visible()
    yield pg
    pg.close()


def _screenshot(pg, name: str) -> None:
    folder = os.environ.get("BERTEVAL_SCREENS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        pg.wait_for_timeout(500)  # let plots finish their transition
        pg.screenshot(path=str(Path(folder) / f"app_{name}.png"), full_page=True)


def _run_example(pg, tab: str, examples: str, prefix: str, first_input: str, button: str) -> None:
    """Open the tab, click the example starting with `prefix`, wait until it filled the inputs, press the button."""
    pg.get_by_role("tab", name=tab).click()
    pg.locator(f"#{examples}").get_by_text(prefix).first.click()
    expect(pg.locator(f"#{first_input} textarea")).to_have_value(re.compile("^" + re.escape(prefix)))
    pg.get_by_role("button", name=button, exact=True).click()


def test_classify_shows_a_label_with_probabilities(page):
    _run_example(page, "Classify", "classify-examples", "A gorgeous, witty", "classify-sentence", "Classify")
    label = page.locator("#classify-label")
    expect(label).to_contain_text("positive")
    expect(label).to_contain_text(re.compile(r"\d+%"))
    expect(page.locator("#classify-about")).to_contain_text("dev accuracy")
    expect(page.locator("#classify-compare")).to_contain_text("pooler")
    _screenshot(page, "classify")
    # A refusal is a message in the page, not a traceback: an empty sentence.
    page.locator("#classify-sentence textarea").fill("")
    page.get_by_role("button", name="Classify", exact=True).click()
    expect(page.locator("#classify-status")).to_contain_text("empty")


def _served_head():
    """The record of the head the page answers with (committed: without one this fails, it does not skip)."""
    from berteval.serve.qa import served_record
    from berteval.store import Store

    rec = served_record(Store())
    assert rec is not None and (Store().root / rec.config["adapter_dir"] / "adapter_model.safetensors").is_file()
    return rec


def test_answer_highlights_the_span_and_names_the_full_train_head_and_its_official_dev_score(page):
    from berteval.tasks import squad

    rec = _served_head()
    _run_example(page, "Answer", "qa-examples", "In what country", "qa-question", "Answer")
    # Whatever span the head picks (it is not asked to be right here), it is highlighted in the
    # context, heads the n-best table, and the two logit curves are drawn.
    highlight = page.locator("#qa-highlight .highlighted")
    expect(highlight).to_have_count(1)
    span = highlight.inner_text().strip()
    assert span and span in page.locator("#qa-context textarea").input_value()
    expect(page.locator("#qa-nbest")).to_contain_text(span)
    about = page.locator("#qa-about")
    expect(about).to_contain_text("Head:")
    expect(about).to_contain_text(rec.run_id)  # the page names the record behind the head
    # The committed head trained on all of the SQuAD train set answers (issue 26), quoted with its
    # official-dev score over every dev question, no longer a k-fold estimate.
    assert squad.trained_on_full_train(rec.config), f"the page serves {rec.run_id}, not the full-train-set head"
    expect(about).to_contain_text(f"all {rec.n_train:,} questions of the SQuAD v1.1 train set")
    expect(about).to_contain_text(f"official dev, all {rec.n_eval:,} questions")
    assert rec.n_train == 87_599 and rec.n_eval == 10_570, (rec.n_train, rec.n_eval)
    expect(about).not_to_contain_text("cross-validation")
    expect(about).to_contain_text(f"F1 {rec.metrics['f1']:.1f}")
    # Beside it, the published anchors, drawn apart as published (issue 26).
    expect(about).to_contain_text("Published, for scale")
    expect(about).to_contain_text("BERT-base (110M parameters) F1 88.5")
    expect(page.locator("#qa-logits .main-svg").first).to_be_visible()
    expect(page.locator("#qa-logits")).to_contain_text("start logit")
    _screenshot(page, "answer")


NORMANS = ("The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, a region "
           "in France. They were descended from Norse raiders and pirates from Denmark, Iceland and Norway who, "
           "under their leader Rollo, agreed to swear fealty to King Charles III of West Francia.")


def test_a_repeated_paragraph_lists_each_answer_once(page):
    page.get_by_role("tab", name="Answer").click()
    page.locator("#qa-question textarea").fill("Where were the Norse raiders from?")
    page.locator("#qa-context textarea").fill(" ".join([NORMANS] * 8))  # the same paragraph, eight times
    page.get_by_role("button", name="Answer", exact=True).click()
    expect(page.locator("#qa-about")).to_contain_text("overlapping windows")
    rows = page.locator("#qa-nbest [role=row]")  # the header row, then one per answer: rank, answer, ...
    expect(rows.nth(1)).to_contain_text("Denmark")
    answers = [rows.nth(i).inner_text().split("\n")[1].strip() for i in range(1, rows.count())]
    assert len(answers) > 1 and len(answers) == len(set(answers)), answers
    _screenshot(page, "answer_repeated")


def test_next_sentence_shows_an_is_next_probability(page):
    _run_example(page, "Next sentence", "nsp-examples", "The Normans gave", "nsp-a", "Does B follow A?")
    expect(page.locator("#nsp-label")).to_contain_text(re.compile(r"IsNext.*\d+%", re.S))
    about = page.locator("#nsp-about")
    expect(about).to_contain_text(re.compile(r"P\(IsNext\) = 0\.\d{3}"))
    expect(about).to_contain_text("probe")  # the default model has no pretrained NSP head, and the page says so
    _screenshot(page, "nsp")


def test_next_sentence_on_an_nsp_trained_encoder_answers_with_its_pretrained_head(page):
    # default+mlm-nsp carries an NSP head trained through its pooler (leaderboard/results/encoders): the page
    # answers with that head, not a probe, and says which pooler it read.
    page.locator("#model input").click()
    page.get_by_role("option", name="default+mlm-nsp", exact=True).click()
    expect(page.locator("#model input")).to_have_value("default+mlm-nsp")
    _run_example(page, "Next sentence", "nsp-examples", "The Normans gave", "nsp-a", "Does B follow A?")
    about = page.locator("#nsp-about")
    expect(about).to_contain_text("pretrained NSP head")
    expect(about).to_contain_text("NSP-trained")
    expect(about).not_to_contain_text("a probe trained on NSP pairs answers instead")
    expect(page.locator("#nsp-label")).to_contain_text(re.compile(r"IsNext.*\d+%", re.S))
    _screenshot(page, "nsp_pretrained")


def test_inside_bert_recomputes_the_pooler(page):
    _run_example(page, "Inside BERT", "inside-examples", "The cat sat", "inside-text", "Look inside")
    report = page.locator("#inside-report")
    expect(report).to_contain_text("(1, 9, 384)")  # last_hidden_state: 9 tokens x 384
    expect(report).to_contain_text("max abs difference")
    expect(report).to_contain_text("(equal)")
    expect(report).to_contain_text("never trained")
    _screenshot(page, "inside")


def _choose_model(pg, name: str) -> None:
    """Type an encoder into the Encoder box (a listed one, or a name the operator allowed)."""
    box = pg.locator("#model input")
    box.fill(name)
    box.press("Enter")
    expect(box).to_have_value(name)


def test_a_question_the_context_cannot_answer_is_probably_not_in_it(page):
    page.get_by_role("tab", name="Answer").click()
    page.locator("#qa-question textarea").fill("Who won the 1998 FIFA World Cup?")
    page.locator("#qa-context textarea").fill(
        "BERT's pooler takes the final hidden state of the [CLS] token, multiplies it by a learned matrix, adds "
        "a bias and applies a tanh. It was trained by next-sentence prediction during pre-training.")
    page.get_by_role("button", name="Answer", exact=True).click()
    expect(page.locator("#qa-about")).to_contain_text("The answer is probably not in this text.")
    score = page.locator("#qa-confidence")
    expect(score).to_contain_text("below the threshold")
    expect(score).to_contain_text("ROC AUC")
    expect(page.locator("#qa-nbest")).to_contain_text("start + end logit")
    _screenshot(page, "answer_not_in_text")


def test_next_sentence_shows_every_offline_encoder_side_by_side(page):
    from berteval import serve

    _run_example(page, "Next sentence", "nsp-examples", "The Normans gave", "nsp-a", "Does B follow A?")
    table = page.locator("#nsp-all")
    expect(table).to_contain_text("The same pair under every encoder")
    for name in serve.offline_models():
        expect(table.get_by_role("cell", name=name, exact=True)).to_be_visible()
    expect(table).to_contain_text("mean, through a probe trained on NSP pairs")  # default: a probe on mean
    expect(table).to_contain_text("pretrained NSP head")  # the NSP-trained encoders: their own head
    expect(table).to_contain_text("0.798")  # default+mlm-nsp's head, its dev accuracy
    _screenshot(page, "nsp_side_by_side")


def test_next_sentence_on_wiki_bert_mini_answers_with_its_own_head(page):
    """The twin pre-trained here with NSP answers with its own head, and its Inside BERT view shows its masked-LM
    head's guesses (both twins are committed, so both are in the Encoder box)."""
    from berteval import serve

    assert {"wiki-bert-mini", "wiki-bert-mini-nonsp"} <= set(serve.offline_models())
    _choose_model(page, "wiki-bert-mini")
    _run_example(page, "Next sentence", "nsp-examples", "The Normans gave", "nsp-a", "Does B follow A?")
    expect(page.locator("#nsp-about")).to_contain_text("own pretrained NSP head")
    expect(page.locator("#nsp-label")).to_contain_text(re.compile(r"(IsNext|NotNext).*\d+%", re.S))
    _screenshot(page, "nsp_wiki_bert_mini")
    _run_example(page, "Inside BERT", "inside-examples", "The cat sat on the [MASK]", "inside-text", "Look inside")
    expect(page.locator("#inside-heads")).to_contain_text("masked LM")
    _screenshot(page, "inside_wiki_bert_mini")


def test_answer_on_a_pre_trained_twin_uses_its_own_committed_squad_head(page):
    """Issue 26 item 5: each twin's SQuAD fine-tune is committed, so choosing one answers with it, named with its
    official-dev figure; uncalibrated here, and the page says so."""
    from berteval.serve.qa import served_record
    from berteval.store import Store

    rec = served_record(Store(), "wiki-bert-mini-nonsp")
    assert rec is not None and rec.model == "berteval/wiki-bert-mini-nonsp" and rec.n_train == 87_599
    _choose_model(page, "wiki-bert-mini-nonsp")
    _run_example(page, "Answer", "qa-examples", "In what country", "qa-question", "Answer")
    about = page.locator("#qa-about")
    expect(about).to_contain_text(rec.run_id)
    expect(about).to_contain_text(f"F1 {rec.metrics['f1']:.1f}")
    expect(page.locator("#qa-highlight .highlighted")).to_have_count(1)
    expect(page.locator("#qa-confidence")).to_contain_text("not calibrated here")
    expect(page.locator("#qa-logits .main-svg").first).to_be_visible()
    _screenshot(page, "answer_twin")


def test_inside_bert_shows_the_heads(page):
    _run_example(page, "Inside BERT", "inside-examples", "The cat sat on the [MASK]", "inside-text", "Look inside")
    heads = page.locator("#inside-heads")
    expect(heads).to_contain_text("span QA, Linear(384, 2)")
    expect(heads).to_contain_text("(2, 384)")
    expect(page.locator("#inside-qa-logits .main-svg").first).to_be_visible()
    _screenshot(page, "inside_heads")
    _choose_model(page, "default+mlm-nsp")
    page.get_by_role("button", name="Look inside", exact=True).click()
    expect(heads).to_contain_text("next sentence, Linear(384, 2)")
    expect(heads).to_contain_text("masked LM")
    expect(heads).to_contain_text(re.compile(r"\[MASK\] at token 6: \S+ 0\.\d{3}"))
    _screenshot(page, "inside_heads_mlm")


@pytest.mark.skipif(not (SHARED_DATA / "sst2" / "train.tsv").is_file(), reason="the quick probe reads ../shared/data")
def test_classify_trains_a_quick_probe_for_a_model_without_records(page, stand_in):
    page.get_by_role("tab", name="Classify").click()
    _choose_model(page, str(stand_in))
    # Words of the stand-in's tiny vocabulary: a sentence mostly [UNK] to it gets no label (issue 42).
    page.locator("#classify-sentence textarea").fill("the movie was great and fun")
    page.get_by_role("button", name="Classify", exact=True).click()
    about = page.locator("#classify-about")
    expect(about).to_contain_text("quick probe trained here on demand")
    expect(about).to_contain_text("of a fixed sample of 2,000 SST-2 train sentences")
    expect(about).to_contain_text(re.compile(r"dev accuracy 0\.\d{4} on all 872 SST-2 dev sentences"))
    expect(page.locator("#classify-label")).to_contain_text(re.compile(r"\d+%"))
    _screenshot(page, "classify_quick_probe")


def _classify_pair_example(pg, prefix: str, task: str, b_prefix: str) -> None:
    """Click the Classify example of a pair task (it picks the task and fills both sentences) and press Classify."""
    from berteval import serve

    pg.get_by_role("tab", name="Classify").click()
    pg.locator("#classify-examples").get_by_text(prefix).first.click()
    expect(pg.locator("#classify-task").get_by_role("radio", name=serve.PAGE_TASKS[task].title)).to_be_checked()
    expect(pg.locator("#classify-sentence-b textarea")).to_be_visible()
    expect(pg.locator("#classify-sentence textarea")).to_have_value(re.compile("^" + re.escape(prefix)))
    expect(pg.locator("#classify-sentence-b textarea")).to_have_value(re.compile("^" + re.escape(b_prefix)))
    pg.get_by_role("button", name="Classify", exact=True).click()


def _committed_record(task: str, about: str):
    """The committed record the page names in its About text (the head that answered), read from the records: a
    probe of the chosen encoder (`default`), or a fine-tune whose LoRA adapter is committed beside it."""
    from berteval.records import read_records

    run_ids = re.findall(r"record (\w{16})", about)
    assert len(run_ids) == 1, about
    recs, _ = read_records([REPO / "leaderboard" / "results" / f"{task}.jsonl"])
    rec = next((r for r in recs if r.run_id == run_ids[0]), None)
    assert rec is not None, f"the page names {run_ids[0]}, which is no committed {task} record"
    assert rec.layer == -1
    if rec.regime == "finetune-lora":
        assert (REPO / "leaderboard" / "results" / rec.config["adapter_dir"] / "adapter_model.safetensors").is_file()
    else:
        assert (rec.regime, rec.model) == ("probe", "sentence-transformers/all-MiniLM-L6-v2")
    return rec


def _adapter_encoder(rec) -> str:
    """The encoder a committed adapter was trained on, as the Encoder box names it (its info file says)."""
    from berteval.heads import pooled_adapter

    return pooled_adapter.read_info(REPO / "leaderboard" / "results" / rec.config["adapter_dir"])["base_model_arg"]


def _served_record(task: str, pooling: str = "mean"):
    """The record whose head should answer `task` on `default` reading `pooling`, by the rule the page states: the
    committed fine-tune adapter reading it (any offline encoder) where its dev figure is above default's served
    probe, else that probe. Read here from the records and the files beside them."""
    from berteval.records import read_records
    from berteval.store import Store

    recs, _ = read_records([REPO / "leaderboard" / "results" / f"{task}.jsonl"])
    store = Store(REPO / "leaderboard" / "results")
    probe = store.best(task, model_id="sentence-transformers/all-MiniLM-L6-v2", revision=next(
        r.model_revision for r in recs if r.model == "sentence-transformers/all-MiniLM-L6-v2"), version="1",
        regime="probe", artifact="head_file", pooling=pooling, layer=-1).record
    tuned = [r for r in recs if r.regime == "finetune-lora" and r.pooling == pooling and r.layer == -1
             and (REPO / "leaderboard" / "results" / r.config.get("adapter_dir", "-")).is_dir()]
    best = max(tuned, key=lambda r: r.main_value, default=None)
    return best if best is not None and best.main_value > probe.main_value else probe


def test_classify_answers_an_mrpc_pair_with_the_committed_head_and_its_dev_figures(page):
    _classify_pair_example(page, "The company said its third-quarter profit rose", "mrpc", "Third-quarter profit")
    label = page.locator("#classify-label")
    expect(label).to_contain_text("paraphrase")
    expect(label).to_contain_text(re.compile(r"\d+%"))
    about = page.locator("#classify-about")
    served = _served_record("mrpc")
    expect(about).to_contain_text("logistic-regression probe on mean" if served.regime == "probe" else
                                  f"a fine-tune of {_adapter_encoder(served)} reading mean")
    expect(about).to_contain_text(re.compile(r"MRPC pairs; dev accuracy 0\.\d{4}, paraphrase F1 0\.\d{4}"))
    expect(page.locator("#classify-status")).to_be_hidden()
    rec = _committed_record("mrpc", about.inner_text())
    assert rec.pooling == "mean" and rec.run_id == served.run_id
    figures = f"accuracy {rec.metrics['accuracy']:.4f}, paraphrase F1 {rec.metrics['binary_f1']:.4f}"
    expect(about).to_contain_text(figures)
    compare = page.locator("#classify-compare")
    expect(compare).to_contain_text("P(paraphrase)")
    for head in ("cls", "pooler", "mean"):
        expect(compare.get_by_role("cell", name=head, exact=True)).to_be_visible()
    _screenshot(page, "classify_mrpc")


def test_classify_scores_an_stsb_pair_from_0_to_5_with_the_committed_head(page):
    _classify_pair_example(page, "A man is playing a guitar.", "stsb", "A man plays the guitar")
    expect(page.locator("#classify-label")).to_contain_text(re.compile(r"similarity \d\.\d\d of 5"))
    about = page.locator("#classify-about")
    served = _served_record("stsb")
    expect(about).to_contain_text("ridge regression on mean" if served.regime == "probe" else
                                  f"a fine-tune of {_adapter_encoder(served)} reading mean")
    expect(about).to_contain_text(re.compile(r"STS-B pairs; dev Pearson x100 \d+\.\d, Spearman x100 \d+\.\d"))
    expect(page.locator("#classify-status")).to_be_hidden()
    rec = _committed_record("stsb", about.inner_text())
    assert rec.pooling == "mean" and rec.task == "stsb" and rec.run_id == served.run_id
    figures = f"Pearson x100 {rec.metrics['pearson']:.1f}, Spearman x100 {rec.metrics['spearman']:.1f}"
    expect(about).to_contain_text(figures)
    expect(page.locator("#classify-compare")).to_contain_text("score (0-5)")
    _screenshot(page, "classify_stsb")


@pytest.mark.parametrize("task, prefix, b_prefix", [
    ("mrpc", "The company said its third-quarter profit rose", "Third-quarter profit"),
    ("rte", "The museum in the old town hall", "The museum opened"),
    ("stsb", "A man is playing a guitar.", "A man plays the guitar"),
])
def test_a_pair_answer_says_whether_its_head_beats_the_majority_class_or_chance(page, task, prefix, b_prefix):
    """Issue 42: the answer names the served head (on `mean`, the best committed head that can be served: a
    fine-tune's LoRA adapter where its dev figure is above the probe's) with its record's dev figure, and the answer
    line (the first thing under the label) says what it is worth against always answering the dev set's majority
    class (or chance, for STS-B), judged here again from the head's own committed dev predictions; a head that does
    not beat it says so in the answer and in the label."""
    import json

    from berteval.serve import task_heads

    _classify_pair_example(page, prefix, task, b_prefix)
    about = page.locator("#classify-about")
    expect(about).to_contain_text("Answer:")
    answer = about.locator("p").first.inner_text()
    rec = _committed_record(task, about.inner_text())
    assert rec.run_id == _served_record(task).run_id
    figure = f"{rec.main_value:.1f}" if task == "stsb" else f"{rec.main_value:.4f}"
    assert f"dev {task_heads.METRICS[rec.main_metric].label} {figure}" in about.inner_text()
    predictions = json.loads((REPO / "leaderboard" / "results" / rec.predictions_file).read_text())
    base = task_heads.baseline(task, predictions)
    label = page.locator("#classify-label").inner_text()
    if base.beaten:
        assert answer.startswith("Answer:") and "this head beats" in answer and "at chance" not in label, answer
    else:
        assert "no better than " + base.what in answer and f"{base.value:.3f}" in answer, answer
        assert "at chance" in label
    _screenshot(page, f"classify_{task}_worth")


def test_leaderboard_table_filters_and_figures(page):
    page.get_by_role("tab", name="Leaderboard").click()
    first = page.locator("#board-first")
    expect(first).to_contain_text("SST-2: accuracy")
    expect(first).to_contain_text("The best head measured is")
    table = page.locator("#board-table")
    expect(table).to_contain_text("sst2")
    expect(table).to_contain_text("mean ± std")
    expect(page.locator("#board-summary")).to_contain_text("records match")
    assert page.locator("#board-plot-ablation .main-svg").count() == 0  # a figure is built when it is opened
    _screenshot(page, "leaderboard")
    page.locator("#board-fig-ablation").get_by_text("Pooling ablation", exact=False).first.click()
    expect(page.locator("#board-plot-ablation .main-svg").first).to_be_visible()
    _screenshot(page, "leaderboard_ablation")
    # 8118 (the NSP dev pairs) is in NSP rows only; "nsp" would also match SST-2 rows of +nsp-pooler. Cells, not
    # the table's text: its reproduce commands name other tasks, and Gradio keeps a hidden sizing row.
    page.locator("#board-search input, #board-search textarea").first.fill("8118")
    page.locator("#board-search input, #board-search textarea").first.press("Enter")
    expect(table.get_by_role("gridcell", name="sst2", exact=True)).to_have_count(0)
    expect(table.get_by_role("gridcell", name="nsp", exact=True).first).to_be_visible()


# The targets (issue 28: first view within 2 s of the click, it took 8.7 s; a filter change within 1 s, it took
# 7.6 s) are checked by tests/tools/leaderboard_latency.py, which runs this flow several times on a quiet machine:
# a timed assertion here would fail on a loaded CI runner without the page being any slower.
FIRST_VIEW_S = 2.0
FILTER_S = 1.0


def test_the_leaderboard_shows_its_first_view_and_a_filter_change_redraws_table_and_open_figure(page):
    """With the app warm (served, its records' views computed at start-up), a click on the tab shows the first
    view and the table, and a filter change redraws them and an open figure. The times are printed (pytest -s) and,
    where $BERTEVAL_LEADERBOARD_TIMES names a file, appended to it for tests/tools/leaderboard_latency.py."""
    page.wait_for_timeout(1000)  # the page settled, as a visitor's would be before a click
    start = time.monotonic()
    page.get_by_role("tab", name="Leaderboard").click()
    expect(page.locator("#board-first")).to_contain_text("SST-2: accuracy")
    table = page.locator("#board-table")
    expect(table.get_by_role("gridcell", name="sst2", exact=True).first).to_be_visible()
    first_view = time.monotonic() - start
    page.locator("#board-fig-ablation").get_by_text("Pooling ablation", exact=False).first.click()
    expect(page.locator("#board-plot-ablation .main-svg").first).to_be_visible()
    page.wait_for_timeout(500)
    page.locator("#board-task input").click()
    start = time.monotonic()
    page.get_by_role("option", name="nsp", exact=True).click()
    expect(page.locator("#board-first")).not_to_contain_text("SST-2")
    expect(table.get_by_role("gridcell", name="sst2", exact=True)).to_have_count(0)
    expect(table.get_by_role("gridcell", name="nsp", exact=True).first).to_be_visible()
    expect(page.locator("#board-plot-ablation")).not_to_contain_text("SST-2")
    expect(page.locator("#board-plot-ablation")).to_contain_text("NSP")
    change = time.monotonic() - start
    height = page.evaluate("document.documentElement.scrollHeight")
    print(f"\nleaderboard: first view {first_view:.2f} s after the click, filter change {change:.2f} s, "
          f"page {height:,} px")
    if os.environ.get("BERTEVAL_LEADERBOARD_TIMES"):
        with open(os.environ["BERTEVAL_LEADERBOARD_TIMES"], "a") as f:
            f.write(json.dumps({"first_view_s": first_view, "filter_s": change}) + "\n")


def test_a_shared_leaderboard_url_opens_on_its_filtered_view(browser, app_url):
    """A link with filters in its query opens the Leaderboard tab already filtered; changing a filter writes it back
    into the address bar, so the view can be shared again."""
    pg = browser.new_page(viewport={"width": 1280, "height": 900})
    pg.set_default_timeout(RESULT_MS)
    expect.set_options(timeout=RESULT_MS)
    try:
        pg.goto(app_url + "?tab=leaderboard&task=nsp&regime=probe")
        expect(pg.get_by_role("tab", name="Leaderboard", selected=True)).to_be_visible()
        table = pg.locator("#board-table")
        expect(table.get_by_role("gridcell", name="nsp", exact=True).first).to_be_visible()
        expect(table.get_by_role("gridcell", name="sst2", exact=True)).to_have_count(0)
        expect(pg.locator("#board-first")).to_contain_text("NSP: accuracy")
        expect(pg.locator("#board-first")).not_to_contain_text("SST-2")
        expect(pg.locator("#board-estimates")).not_to_contain_text("k-fold")  # SQuAD's k-fold records: not NSP's
        expect(pg.locator("#board-task input")).to_have_value("nsp")
        pg.locator("#board-findings-details").get_by_text("Findings in full", exact=False).first.click()
        expect(pg.locator("#board-findings")).to_contain_text("NSP, frozen probe")
        _screenshot(pg, "leaderboard_shared")
        pg.locator("#board-pooling input").click()
        pg.get_by_role("option", name="mean", exact=True).click()
        expect(table.get_by_role("gridcell", name="max", exact=True)).to_have_count(0)
        expect(table.get_by_role("gridcell", name="mean", exact=True).first).to_be_visible()
        pg.wait_for_function("() => new URL(window.location.href).searchParams.get('pooling') === 'mean'")
        assert "task=nsp" in pg.url and "regime=probe" in pg.url and "tab=leaderboard" in pg.url
    finally:
        pg.close()


# What a 1366 x 900 screen shows of the Leaderboard tab opened by a link to one task: the tab bar at the top (the link
# scrolls it there), the filters, the task's sentence and its every-model table (issue 42: 4,400 px of tables came
# before the filters, and the main table was 3,590 px wide, its model column off-screen).
FIT_JS = """() => {
  const box = (sel) => document.querySelector(sel).getBoundingClientRect();
  const tables = [...document.querySelectorAll('#board-first table')];
  const main = document.querySelector('#board-table table');
  return {filters_top: box('#board-filters').top, first_top: box('#board-first').top,
          first_bottom: tables[tables.length - 1].getBoundingClientRect().bottom,
          first_header: tables[0].querySelector('th').textContent.trim(),
          table_header: main.querySelector('th').textContent.trim(),
          table_width: main.scrollWidth, table_box: document.querySelector('#board-table').clientWidth,
          page_width: document.documentElement.scrollWidth, viewport: window.innerWidth};
}"""


@pytest.mark.parametrize("task", ["sst2", "nsp", "mrpc", "rte", "stsb", "squad"])
def test_a_link_to_one_task_shows_filters_and_its_first_view_on_one_screen(browser, app_url, task):
    pg = browser.new_page(viewport={"width": 1366, "height": 900})
    pg.set_default_timeout(RESULT_MS)
    expect.set_options(timeout=RESULT_MS)
    try:
        pg.goto(app_url + f"?tab=leaderboard&task={task}")
        expect(pg.locator("#board-table").get_by_role("gridcell", name=task, exact=True).first).to_be_visible()
        pg.wait_for_function("() => window.scrollY > 0")  # the tab bar scrolled to the top (SHOW_TAB_JS)
        pg.wait_for_timeout(300)
        fit = pg.evaluate(FIT_JS)
        _screenshot(pg, f"leaderboard_first_{task}")
        assert 0 <= fit["filters_top"] < fit["first_top"], fit  # the filters first, in view
        assert fit["first_bottom"] <= 900, fit  # the task's every-model table ends on the first screen
        assert fit["first_header"] == "model" and fit["table_header"].startswith("model"), fit  # the model first
        assert fit["table_width"] <= fit["table_box"] + 1 and fit["page_width"] <= fit["viewport"], fit
    finally:
        pg.close()


PHISH = ('<img src="http://other-host/pixel"> <a href="http://other-host/phish">Session expired: click here to sign '
         'in again</a> <form action="http://other-host/f"><input name=password></form> [or here](http://other-host/x)')


def test_a_shared_link_with_html_renders_it_as_text(browser, app_url):
    """The payload of a phishing link (an image fetched on load, a link, a password form) shows as plain text in
    the Leaderboard tab: no element of it reaches the page, and nothing is requested from the other host."""
    from urllib.parse import quote, urlparse

    pg = browser.new_page(viewport={"width": 1280, "height": 900})
    pg.set_default_timeout(RESULT_MS)
    asked = []
    pg.on("request", lambda r: asked.append(r.url) if urlparse(r.url).hostname == "other-host" else None)
    try:
        pg.goto(app_url + "?tab=leaderboard&q=" + quote(PHISH))
        expect(pg.locator("#board-summary")).to_contain_text("Session expired", timeout=RESULT_MS)
        for selector in ('img[src*="other-host"]', 'a[href*="other-host"]', 'form[action*="other-host"]',
                         'input[name="password"]'):
            assert pg.locator(selector).count() == 0, selector
        assert not asked, asked
        _screenshot(pg, "leaderboard_payload")
    finally:
        pg.close()
