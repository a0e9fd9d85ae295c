"""The app end to end, in a real headless Chromium: start `python app.py`, visit every tab,
run one example in each and read what a visitor would see.

Runs by default (CI installs Debian's chromium; Playwright's Python package drives it,
Playwright's own browser download is not used) and skips, saying why, where the browser
or playwright is missing. BERTEVAL_SCREENS=<folder> also saves a full-page screenshot of
each tab there as app_<tab>.png.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO

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
    pytest.mark.skipif(not CHROMIUM.is_file(), reason=f"{CHROMIUM} is missing: apt-get install -y chromium"),
    pytest.mark.skipif(sync_playwright is None, reason="playwright is not installed: pip install -r requirements.txt"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    port = _free_port()
    log = tmp_path_factory.mktemp("app") / "app.log"
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1"}
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "app.py", "--host", "127.0.0.1", "--port", str(port)], cwd=REPO,
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"app.py exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"app.py did not answer on {url} within {STARTUP_S} s:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    # Whatever went wrong in the page, the server log must not hold an unhandled traceback.
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]


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


def test_answer_highlights_the_committed_adapters_span(page):
    from berteval import models
    from berteval.store import Store

    # The adapter the page answers with is committed: without it this test fails, it does not skip.
    ident = models.identify(models.DEFAULT)
    found = Store().best("squad", model_id=ident.model_id, revision=ident.revision, version="1", regime="finetune",
                         artifact="adapter_dir")
    assert found is not None and (found.path / "adapter_model.safetensors").is_file()
    _run_example(page, "Answer", "qa-examples", "In what country", "qa-question", "Answer")
    # Whatever span the adapter picks (it is not asked to be right here), it is highlighted in the
    # context, heads the n-best table, and the two logit curves are drawn.
    highlight = page.locator("#qa-highlight .highlighted")
    expect(highlight).to_have_count(1)
    span = highlight.inner_text().strip()
    assert span and span in page.locator("#qa-context textarea").input_value()
    expect(page.locator("#qa-nbest")).to_contain_text(span)
    expect(page.locator("#qa-about")).to_contain_text("LoRA fine-tuned")
    expect(page.locator("#qa-logits .main-svg").first).to_be_visible()
    expect(page.locator("#qa-logits")).to_contain_text("start logit")
    _screenshot(page, "answer")


def test_next_sentence_shows_an_is_next_probability(page):
    _run_example(page, "Next sentence", "nsp-examples", "The Normans gave", "nsp-a", "Does B follow A?")
    expect(page.locator("#nsp-label")).to_contain_text(re.compile(r"IsNext.*\d+%", re.S))
    about = page.locator("#nsp-about")
    expect(about).to_contain_text(re.compile(r"P\(IsNext\) = 0\.\d{3}"))
    expect(about).to_contain_text("probe")  # the default model has no pretrained NSP head, and the page says so
    _screenshot(page, "nsp")


def test_inside_bert_recomputes_the_pooler(page):
    _run_example(page, "Inside BERT", "inside-examples", "The cat sat", "inside-text", "Look inside")
    report = page.locator("#inside-report")
    expect(report).to_contain_text("(1, 9, 384)")  # last_hidden_state: 9 tokens x 384
    expect(report).to_contain_text("max abs difference")
    expect(report).to_contain_text("(equal)")
    expect(report).to_contain_text("never trained")
    _screenshot(page, "inside")


def test_leaderboard_table_filters_and_figures(page):
    page.get_by_role("tab", name="Leaderboard").click()
    table = page.locator("#board-table")
    expect(table).to_contain_text("sst2")
    expect(table).to_contain_text("mean ± std")
    expect(page.locator("#board-summary")).to_contain_text("records match")
    expect(page.locator(".main-svg").first).to_be_visible()
    _screenshot(page, "leaderboard")
    page.locator("#board-search input, #board-search textarea").first.fill("nsp")
    page.locator("#board-search input, #board-search textarea").first.press("Enter")
    expect(table).not_to_contain_text("sst2")
    expect(table).to_contain_text("nsp")
