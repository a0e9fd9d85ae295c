"""The leaderboard's views as issue 28 left them: computed once per records version, a compact first view per
task, the k-fold estimates following the filters, the new GLUE tasks and the regression kind, reproduce commands
with the docs' relative paths, and the reason an interval can exclude 0 beside "not significant".

Toy records are real RunRecords (tests/leaderboard/test_leaderboard.py's helpers); the committed records are read
where a test is about what a visitor sees. Offline and fast: no Gradio, no browser.
"""

from __future__ import annotations

import re

import pandas as pd
import plotly.graph_objects as go
import pytest

from berteval import record_lookup
from conftest import REPO
from leaderboard import board, data, disagreements, findings, overview, report, views
from test_leaderboard import MODEL, full_records, paired, rec, write

QNLI_SPLIT = "validation, k-fold over dev pairs (k=5, seed 0)"


def _qnli(pooling="cls", seed=0, value=0.6, **kw):
    # The whole estimate (every dev pair scored once): its config lists the folds, as berteval.regimes.kfold writes.
    return rec(task="qnli", pooling=pooling, seed=seed, value=value, split=QNLI_SPLIT,
               config={"command": "python -m berteval run --task qnli", "folds": [{"fold": 1, "accuracy": value}]}, **kw)


def _bootstrap(pooling, p=0.5, difference=1.0):
    return {"other": {"pooling": pooling, "layer": -1, "run_id": "x"}, "test": "paired_bootstrap_pearson",
            "difference": difference, "p_value": p}


def glue_records() -> list:
    """STS-B (regression, Pearson/Spearman x100, bootstrap paired tests), MRPC (accuracy + binary F1), RTE, and
    QNLI's k-fold estimates: one model, two seeds, cls/pooler/mean."""
    out = []
    for seed in (0, 1):
        done = []
        for pooling, v in (("cls", 24.0), ("pooler", 23.0), ("mean", 32.0)):
            out.append(rec(task="stsb", pooling=pooling, seed=seed, metric="pearson",
                           metrics={"pearson": v + seed, "spearman": v + 1 + seed},
                           paired=[_bootstrap(o, difference=1.0) for o in done]))
            out.append(rec(task="mrpc", pooling=pooling, seed=seed, metrics={"accuracy": v / 40 + 0.05 * seed,
                                                                               "binary_f1": 0.78}))
            out.append(rec(task="rte", pooling=pooling, seed=seed, value=v / 50))
            done.append(pooling)
    out += [_qnli("cls", value=0.53), _qnli("mean", value=0.50, paired=[paired("cls", p=0.4)])]
    return out


# -- computed once per records version -------------------------------------------------------------------------

def test_a_board_is_computed_once_per_records_version_and_each_view_once_per_filter(tmp_path):
    path = write(tmp_path / "r.jsonl", full_records())
    first = board.current([path])
    assert board.current([path]) is first  # the files did not change: the same Board, nothing recomputed
    assert first.table(task="sst2") is first.table(task=["sst2"])  # one filter, however the UI hands it over
    assert first.figure("ablation", task="sst2") is first.figure("ablation", task="sst2")
    assert first.first_view() is first.first_view(None, "all", "")
    write(path, [rec(pooling="mean", seed=9, value=0.9)])  # a run appends a record: a new version
    second = board.current([path])
    assert second is not first and len(second.frame) == len(first.frame) + 1
    assert "9" in " ".join(second.table(task="sst2")["seeds"])


def test_views_keep_their_keys_and_read_the_board(tmp_path):
    v = views(paths=[write(tmp_path / "r.jsonl", full_records())], task="sst2")
    assert set(board.FIGURE_FUNCTIONS) <= set(v) and all(isinstance(v[f], go.Figure) for f in board.FIGURE_FUNCTIONS)
    assert v["first_view"].startswith("#### SST-2") and "NSP" not in v["first_view"]
    assert set(v["table"]["task"]) == {"sst2"} and v["choices"]["task"] == ["nsp", "squad", "sst2"]


# -- the first view ------------------------------------------------------------------------------------------------

def test_the_first_view_of_the_committed_records_is_one_compact_view_per_task():
    md = board.current().first_view()
    titles = re.findall(r"^#### (.+)$", md, flags=re.M)
    # first one row per task (issue 42: the answer to each task on one screen), about the reference encoder
    assert titles[0] == "What the records say, per task"
    head = md[:md.index("#### SST-2")]
    assert "| task | best head measured | the three vectors on all-MiniLM-L6-v2, per regime |" in head
    assert "| SST-2 | `cls+mean` 0.849, fine-tuned, all-MiniLM-L6-v2" in head
    assert "frozen probe: `mean` **0.810**, `pooler` 0.765, `cls` 0.765" in head
    titles = titles[1:]
    assert [t.split(":")[0] for t in titles] == ["SST-2", "NSP", "MRPC", "RTE", "STS-B", "QNLI (5-fold over dev)",
                                                 "SQuAD v1.1"]  # the registry's order, every task with records
    # models x poolings with cls, pooler and mean first, the row's best head of any pooling beside them
    assert md.count("| model | regime | cls | pooler | mean | best head (any pooling) | seeds |") == 7
    assert md.count("The best head measured is") == 6  # QNLI's k-fold estimates are never ranked
    assert "Holm p =" not in md and "95% CI" not in md  # the long findings are below, on demand
    sst2 = md[md.index("#### SST-2"):md.index("#### NSP")]
    assert "| all-MiniLM-L6-v2 | frozen probe | 0.765 | 0.765 | **0.810** |" in sst2
    # the sentence speaks of the reference encoder (ties went to the shortest name, wiki-bert-mini: issue 42)
    assert "of the three vectors on all-MiniLM-L6-v2, `mean` reads best with a frozen probe" in sst2
    squad = md[md.index("#### SQuAD"):]
    assert "the per-token `span` head reads 11.1" in squad  # span QA: every token beats one vector
    assert len(md) < 1700 * (len(titles) + 1)  # compact: about a screen per task


def test_the_first_view_sentence_says_what_the_paired_tests_separate(tmp_path):
    item = overview.overview(*_parts(write(tmp_path / "r.jsonl", full_records())))[0]
    assert item["task"] == "sst2" and list(item["table"].columns)[:5] == ["model", "regime", "cls", "pooler", "mean"]
    # mean vs cls: p = 0.002 in every seed, Holm over the 6 pairs -> separated; mean vs pooler: p = 0.4 -> not
    assert ("`mean` reads best with a frozen probe, 0.810 against 0.760 for `cls` and 0.750 for `pooler` (the paired "
            "tests put it ahead of `cls`, not of `pooler`, Holm-adjusted over the row's 6 pairs)") in item["sentence"]
    row = item["table"][item["table"]["model"] == "bert-base"].iloc[0]
    assert row["mean"] == "**0.810**" and row["cls"] == "0.760"  # bold: band 1 (nothing measured beats it)
    assert row["best head (any pooling)"] == "`mean` **0.810**"


def test_a_row_trained_on_another_train_set_says_so_in_the_first_view(tmp_path):
    """SQuAD's full-train-set head beside heads trained on the 17-article subset: its row and the sentence name
    its train size, so 79.8 is not read as the recipe beating the others on the same data."""
    recs = [rec(task="squad", pooling="span", regime=regime, metric="f1", value=v, n_train=n)
            for regime, v, n in (("probe", 11.1, 3939), ("finetune", 54.1, 3939), ("finetune-full", 57.2, 3939),
                                 ("finetune-lora-plus", 79.8, 87599))]
    item = overview.overview(*_parts(write(tmp_path / "r.jsonl", recs)))[0]
    regimes = list(item["table"]["regime"])
    assert [r for r in regimes if "trained on" in r] == ["fine-tuned (LoRA-plus), trained on 87,599 examples"]
    assert "(F1 79.8, trained on 87,599 examples)" in item["sentence"]
    one = overview.overview(*_parts(write(tmp_path / "s.jsonl", recs[:3])))[0]  # one train size: nothing said
    assert not any("trained on" in r for r in one["table"]["regime"]) and "trained on" not in one["sentence"]


def _parts(path):
    b = board.current([path])
    return b.frame, b.band_frame, b.tests, b.estimates()


# -- k-fold estimates follow the filters, whatever the task's metrics --------------------------------------------

def test_the_kfold_estimates_follow_the_task_filter_and_the_tasks_metrics(tmp_path):
    b = board.current()  # the committed SQuAD k-fold records
    assert overview.estimates_markdown(b.estimates(task="nsp")) == ""
    assert b.estimates(task="nsp").empty and not b.estimates(task="squad").empty
    (title, squad), = overview.estimate_tables(b.estimates(task="squad"))
    assert title == "SQuAD v1.1" and {"F1", "exact match"} <= set(squad.columns) and "accuracy" not in squad.columns
    mixed = board.current([write(tmp_path / "r.jsonl", full_records() + glue_records())])
    qnli = overview.estimates_markdown(mixed.estimates(task="qnli"))
    assert "**QNLI (5-fold over dev)**" in qnli and "| accuracy |" in qnli and "exact match" not in qnli
    assert "0.5300" in qnli and QNLI_SPLIT.removeprefix("validation, ") in qnli
    assert "qnli" in mixed.choices["task"]  # a task with estimates only can still be picked
    assert "qnli" not in set(mixed.frame["task"])  # and is never ranked


# -- new tasks and the regression kind --------------------------------------------------------------------------

def test_glue_tasks_the_regression_kind_and_qnli_estimates_draw_every_view(tmp_path):
    path = write(tmp_path / "r.jsonl", glue_records())
    v = views(paths=[path])
    for name in board.FIGURE_FUNCTIONS:
        fig = v[name]
        assert isinstance(fig, go.Figure) and "could not draw" not in (fig.layout.title.text or ""), name
    assert set(v["table"]["task"]) == {"stsb", "mrpc", "rte"}
    md = v["first_view"]
    assert "#### STS-B: Pearson x100 (0–100)" in md and "#### MRPC" in md and "#### RTE" in md
    assert "#### QNLI (5-fold over dev)" in md and "k-fold estimates only" in md
    stsb = md[md.index("#### STS-B"):]
    assert "`mean` reads best with a frozen probe, 32.5 against" in stsb  # Pearson x100 as the records hold it, not as 0-1
    assert "Pearson" in v["findings"] and "qnli" not in v["findings"].lower()
    summary, table = disagreements.view(v["frame"], "stsb", MODEL, "probe", 0, "cls", "mean")
    assert "never right or wrong" in summary and table.empty  # a regression has no disagreements to list
    page = report.build_html(*data.load([path]))
    assert "STS-B" in page and "QNLI (5-fold over dev)" in page


# -- reproduce commands ------------------------------------------------------------------------------------------

def test_reproduce_commands_carry_the_docs_relative_paths_never_this_machines():
    table = board.current().table()
    commands = " ; ".join(table["reproduce"])
    assert "--data-dir ../shared/data" in commands and "--out leaderboard/results" in commands
    assert not re.search(r"--(data-dir|out)[ =]/", commands), "an absolute folder in a reproduce command"
    assert "/berteval/__main__.py" not in commands
    raw = [r for r in board.current().frame["command"] if "--data-dir /" in r]
    assert raw  # the records keep sys.argv as it was: only what is shown changes


@pytest.mark.parametrize("raw, shown", [
    ("/w/x/berteval/__main__.py run --task sst2 --data-dir /work/shared/data --out /work/main/leaderboard/results",
     "python -m berteval run --task sst2 --data-dir ../shared/data --out leaderboard/results"),
    ("/w/berteval/__main__.py run --data-dir=/abs/data --out=/tmp/r --seeds 0",
     "python -m berteval run --data-dir=../shared/data --out=/tmp/r --seeds 0"),
    ("python -m berteval run --data-dir ../shared/data --out leaderboard/results",
     "python -m berteval run --data-dir ../shared/data --out leaderboard/results"),
])
def test_command_writes_folders_as_the_docs_do(raw, shown):
    assert record_lookup.command(rec(config={"command": raw})) == shown


# -- an interval that excludes 0 beside "not significant" -------------------------------------------------------

def test_a_steady_margin_that_the_test_does_not_separate_says_why_where_it_is_shown(tmp_path):
    # mean ahead of cls by 2 points in each of three seeds (interval far from 0), McNemar p = 0.3 each seed
    recs = []
    for seed, off in ((0, 0.0), (1, 0.001), (2, 0.002)):
        recs.append(rec(pooling="cls", seed=seed, value=0.78 + off))
        recs.append(rec(pooling="mean", seed=seed, value=0.80 + off, paired=[paired("cls", p=0.3)]))
    items = findings.findings(data.load([write(tmp_path / "r.jsonl", recs)])[0])
    assert "[95% CI 2.0, 2.0] (Holm p = 0.300, not significant†)" in items[0]["sentence"]
    md = findings.as_markdown(items)
    assert md.endswith(findings.WHY) and "seed to seed" in md and "dev examples separate" in md
    wobbly = []  # the margin moves across 0 between seeds: the interval includes 0, nothing to explain
    for seed, diff in ((0, 0.02), (1, -0.01), (2, 0.01)):
        wobbly.append(rec(pooling="cls", seed=seed, value=0.78))
        wobbly.append(rec(pooling="mean", seed=seed, value=0.78 + diff, paired=[paired("cls", p=0.3)]))
    plain = findings.as_markdown(findings.findings(data.load([write(tmp_path / "s.jsonl", wobbly)])[0]))
    assert "not significant)" in plain and "†" not in plain  # said only where it applies


# -- the disagreement viewer speaks to a visitor ---------------------------------------------------------------------

def test_the_disagreement_viewer_tells_a_visitor_what_the_server_lacks_never_a_flag(monkeypatch):
    monkeypatch.delenv("BERTEVAL_DATA", raising=False)  # a server without the data (CI sets it for other tests)
    df = board.current().frame
    model = "sentence-transformers/all-MiniLM-L6-v2"
    summary, table = disagreements.view(df, "sst2", model, "probe", 0, "mean", "cls", data_dir=None, limit=3,
                                        visitor=True)
    assert "not on this server" in summary and "--data-dir" not in summary and "BERTEVAL_DATA" not in summary
    assert len(table) == 6
    cli, _ = disagreements.view(df, "sst2", model, "probe", 0, "mean", "cls", data_dir=None, limit=3)
    assert "--data-dir" in cli  # the report and the CLI keep saying how to add the texts
    msg, _ = disagreements.view(df, "squad", model, "probe", 0, "cls", "mean", data_dir=None, visitor=True)
    assert "not on this server" in msg and "--data-dir" not in msg


def test_texts_are_found_as_the_docs_commands_find_the_data(monkeypatch, tmp_path):
    monkeypatch.setenv("BERTEVAL_DATA", str(tmp_path))
    assert disagreements.texts_dir() == tmp_path
    monkeypatch.delenv("BERTEVAL_DATA")
    beside = REPO.parent / "shared" / "data"
    assert disagreements.SHARED_DATA == beside.resolve()
    assert disagreements.texts_dir() == (beside.resolve() if beside.is_dir() else None)


def test_the_ablation_figure_names_panels_in_words_and_labels_only_poolings():
    fig = board.current().figure("ablation")
    titles = [a.text for a in fig.layout.annotations]
    assert "SST-2 · all-MiniLM-L6-v2" in titles and not any("sentence-transformers/" in t for t in titles)
    labels = [x for t in fig.data if t.name == "mean of seeds" for x in t.x[1]]
    assert labels and not any("(" in x for x in labels), [x for x in labels if "(" in x][:3]


@pytest.fixture(autouse=True)
def _fresh_boards():
    board.clear()
    yield
    board.clear()

