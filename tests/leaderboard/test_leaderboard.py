"""The leaderboard: records -> frame -> figures, table, CSV and the standalone report.

Toy records are real RunRecords written with the core's `append_record`, so these tests
read them through the same validating reader as the committed results. Everything is
offline and fast (no Gradio, no browser).
"""

from __future__ import annotations

import io
import json
import math
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import plotly
import plotly.graph_objects as go
import pytest

from berteval import records, store
from berteval.stats import summarise
from conftest import REPO
from leaderboard import bands, data, disagreements, figures, findings, references, report, table, views
from leaderboard.figures import compare

MODEL, OTHER = "toy/bert-base", "toy/minilm"


def rec(task="sst2", pooling="cls", seed=0, layer=-1, regime="probe", model=MODEL, value=0.8, metric="accuracy",
        metrics=None, paired=(), n_train=100, **kw):
    base = dict(
        schema_version=records.SCHEMA_VERSION, run_id=f"{model}-{task}-{pooling}-{regime}-{layer}-{seed}-{n_train}",
        timestamp="2026-12-02T00:00:00+00:00", model=model, model_revision="rev1", task=task, task_version="1",
        data_sha256="abcdef0123456789" * 4, split="validation", pooling=pooling, regime=regime, layer=layer,
        seed=seed, metrics=metrics or {metric: value}, main_metric=metric, n_train=n_train, n_eval=50,
        config={"command": f"python -m berteval run --task {task} --pooling {pooling}",
                "pooler_provenance": "trained by NSP"},
        versions={"berteval": "0.1.0", "torch": "2.13.0"}, git_commit="0123456789abcdef", device="cpu",
        dtype="fp32", wall_s=1.5, paired_tests=list(paired),
    )
    base.update(kw)
    return records.RunRecord(**base)


def paired(pooling, layer=-1, p=0.01, a=10, b=3):
    return {"other": {"pooling": pooling, "layer": layer, "run_id": "x"}, "test": "mcnemar_exact",
            "n_only_self_correct": a, "n_only_other_correct": b, "p_value": p}


# SST-2 accuracies per pooling (0-1), offsets per seed: the means are easy to check by hand.
SST2 = {"cls": 0.76, "pooler": 0.75, "mean": 0.81, "max": 0.79}
SEED_OFFSET = {0: -0.01, 1: 0.0, 2: 0.01}


def full_records() -> list[records.RunRecord]:
    out = []
    for seed, off in SEED_OFFSET.items():
        done = []
        for pooling, v in SST2.items():
            out.append(rec(pooling=pooling, seed=seed, value=v + off,
                           paired=[paired(o, p=0.002 if {o, pooling} == {"cls", "mean"} else 0.4) for o in done]))
            done.append(pooling)
        for layer in (3, 5):
            for pooling in ("cls", "mean"):
                out.append(rec(pooling=pooling, seed=seed, layer=layer, value=SST2[pooling] - 0.02 + off,
                               paired=[paired("cls", p=0.03)]))
        # SQuAD: F1 and EM on 0-100, a span head, three regimes
        for regime, f1 in (("probe", 40.0), ("finetune", 85.0), ("pretrained", 70.0)):
            out.append(rec(task="squad", pooling="span", regime=regime, seed=seed, metric="f1",
                           metrics={"f1": f1 + 10 * off, "exact_match": f1 - 10}))
        # NSP: probes on four poolings and the pretrained NSP head
        for pooling, v in SST2.items():
            out.append(rec(task="nsp", pooling=pooling, seed=seed, value=v + 0.1 + off))
        out.append(rec(task="nsp", pooling="nsp-head", regime="pretrained", seed=seed, value=0.97))
    out.append(rec(model=OTHER, pooling="mean", value=0.7))  # a second model, one seed
    return out


def write(path, recs):
    for r in recs:
        store.append_record(path, r)
    return path


@pytest.fixture
def full(tmp_path):
    write(tmp_path / "toy.jsonl", full_records())
    df, problems = data.load([tmp_path / "toy.jsonl"])
    assert problems == []
    return df


# -- loading -------------------------------------------------------------------------------------------------

def test_frame_has_one_row_per_record_with_identity_metrics_and_provenance(full):
    assert len(full) == len(full_records()) == 3 * (4 + 4 + 3 + 5) + 1
    row = full[(full["task"] == "squad") & (full["regime"] == "finetune") & (full["seed"] == 2)].iloc[0]
    assert row["value"] == pytest.approx(85.1) and row["metric_f1"] == pytest.approx(85.1)
    assert row["metric_exact_match"] == pytest.approx(75.0) and row["main_metric"] == "f1"
    assert row["data_short"] == "abcdef012345" and row["git_short"] == "0123456789"
    assert row["command"] == "python -m berteval run --task squad --pooling span"
    assert row["versions"] == "berteval 0.1.0, torch 2.13.0" and row["version_torch"] == "2.13.0"
    assert row["n_eval"] == 50 and row["dtype"] == "fp32" and row["wall_s"] == 1.5
    assert set(full["layer_label"]) == {"last", "3", "5"}
    # the pooler caveat is kept only where the pooler was read
    assert set(full.loc[full["pooling"] == "pooler", "pooler_provenance"]) == {"trained by NSP"}
    assert set(full.loc[full["pooling"] == "cls", "pooler_provenance"]) == {""}


def test_default_paths_read_the_committed_results():
    files = data.record_files()
    assert data.RESULTS_DIR / "sst2.jsonl" in files
    df, problems = data.load()
    assert problems == [] and len(df) >= 24 and "sst2" in set(df["task"])


def test_aggregate_matches_stats_summarise(full):
    agg = data.aggregate(full)
    # one row per model x task x regime x pooling x layer
    assert len(agg) == 4 + 4 + 3 + 5 + 1
    cls = agg[(agg["task"] == "sst2") & (agg["pooling"] == "cls") & (agg["layer"] == -1)].iloc[0]
    expected = summarise([0.75, 0.76, 0.77])
    assert cls["mean"] == pytest.approx(0.76) and cls["std"] == pytest.approx(expected.std)
    assert cls["ci95_low"] == pytest.approx(expected.ci95_low) and cls["n_seeds"] == 3
    assert cls["ci95_half"] == pytest.approx(expected.ci95_high - 0.76) and cls["seeds"] == "0, 1, 2"
    assert cls["n_eval"] == 50 and cls["data_short"] == "abcdef012345"
    lone = agg[agg["model"] == OTHER].iloc[0]
    assert lone["n_seeds"] == 1 and math.isnan(lone["ci95_half"])


def test_different_setups_are_not_averaged_and_get_labels(tmp_path):
    path = write(tmp_path / "r.jsonl", [rec(seed=0, value=0.8), rec(seed=0, value=0.6, n_train=10)])
    df, _ = data.load([path])
    agg = data.aggregate(df)
    assert sorted(agg["mean"]) == [0.6, 0.8]
    assert sorted(data.setup_labels(agg)) == ["train 10", "train 100"]
    # The ablation draws each group's main setup (the largest training set) only: a label per setup ran into the
    # next panel, and the smaller sizes are the learning curves' (tests/core/test_learning_curves.py).
    means = next(t for t in figures.pooling_ablation(df).data if t.name == "mean of seeds")
    assert list(means.x[1]) == ["cls"] and list(means.y) == [0.8]


def test_bad_line_reported_with_line_number_and_rest_still_shows(tmp_path):
    path = write(tmp_path / "r.jsonl", [rec(pooling="cls"), rec(pooling="mean", value=0.9)])
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "{broken", lines[1]]) + "\n")
    df, problems = data.load([path])
    assert [(p.line, p.path) for p in problems] == [(2, str(path))] and "not valid JSON" in problems[0].message
    assert sorted(df["pooling"]) == ["cls", "mean"]
    out = tmp_path / "report.html"
    report.write_report(out, [path])
    page = out.read_text()
    assert "1 bad line(s)" in page and f"{path}</code> line 2" in page
    v = views(paths=[path])
    assert v["n_records"] == 2 and v["problems"] == [f"{path}:2: {problems[0].message}"]


def test_folder_reads_its_jsonl_files_and_a_missing_file_is_a_problem(tmp_path):
    write(tmp_path / "a.jsonl", [rec()])
    write(tmp_path / "b.jsonl", [rec(task="nsp")])
    df, problems = data.load([tmp_path, tmp_path / "missing.jsonl"])
    assert sorted(df["task"]) == ["nsp", "sst2"] and set(df["file"]) == {str(tmp_path / "a.jsonl"),
                                                                          str(tmp_path / "b.jsonl")}
    assert len(problems) == 1 and "cannot read" in problems[0].message


def test_pairs_frame_reads_paired_tests(full):
    p = data.pairs(full)
    seed0 = p[(p["seed"] == 0) & (p["a"] == "mean@last") & (p["b"] == "cls@last")].iloc[0]
    assert seed0["p_value"] == 0.002 and seed0["a_only"] == 10 and seed0["b_only"] == 3
    # per seed: 6 pairs among four poolings + 4 layer records each tested against cls@last
    assert len(p) == 3 * (6 + 4)


# -- figures ---------------------------------------------------------------------------------------------------

def _titles(fig: go.Figure) -> str:
    return " ".join([fig.layout.title.text or ""] + [a.text for a in fig.layout.annotations])


def test_ablation_figure_values_error_bars_and_colours(full):
    fig = figures.pooling_ablation(full)
    # panels named in words: the task's label and the model's short name, never "sst2 · toy/bert-base"
    assert "SST-2 · bert-base" in _titles(fig) and "SQuAD v1.1 · bert-base" in _titles(fig)
    assert "sst2 ·" not in _titles(fig) and "toy/" not in _titles(fig)
    # panels in the task registry's order (sst2, sst2 for the second model, nsp, squad): two traces each
    means = fig.data[0]
    assert means.name == "mean of seeds" and list(means.x[1]) == ["cls", "pooler", "mean", "max"]
    i = list(means.x[1]).index("mean")
    assert means.y[i] == pytest.approx(0.81)
    assert means.error_y.array[i] == pytest.approx(summarise([0.80, 0.81, 0.82]).ci95_high - 0.81)
    sst2 = next(t for t in fig.data if t.name == "mean of seeds" and list(t.x[1]) == ["cls", "pooler", "mean", "max"])
    assert list(sst2.marker.color) == [figures.colour(p) for p in ["cls", "pooler", "mean", "max"]]
    assert figures.colour("span") == figures.UNKNOWN_COLOUR
    # tasks never share a y axis: every panel's axis has its own title with the metric's scale
    ytitles = {fig.layout[k].title.text for k in fig.layout if k.startswith("yaxis")}
    assert {"accuracy (0–1)", "F1 (0–100)"} <= ytitles


def test_layer_curves_only_where_layers_exist(full):
    fig = figures.layer_curves(full)
    names = {t.name for t in fig.data}
    assert names == {"cls", "mean"}
    mean = next(t for t in fig.data if t.name == "mean")
    assert list(mean.x) == ["3", "5", "last"] and mean.y[2] == pytest.approx(0.81)


def test_heatmap_per_model_rows_are_task_regime(full):
    fig = figures.task_pooling_heatmap(full)
    assert len(fig.data) == 2  # two models
    hm = next(t for t in fig.data if len(t.y) > 1)
    assert list(hm.x) == ["cls", "pooler", "mean", "max", "nsp-head", "span"]
    row = next(i for i, y in enumerate(hm.y) if y.startswith("SST-2 · frozen probe"))
    assert hm.z[row][2] == 1.0 and hm.z[row][1] == 0.0  # mean best, pooler worst within the task
    assert hm.text[row][2].startswith("0.810")
    # rows: tasks and regimes in their registries' order (probe -> finetune -> pretrained); each names its metric
    assert [y.split("<br>")[0] for y in hm.y] == ["SST-2 · frozen probe", "NSP · frozen probe", "NSP · pretrained head",
                                                  "SQuAD v1.1 · frozen probe", "SQuAD v1.1 · fine-tuned",
                                                  "SQuAD v1.1 · pretrained head"]
    assert hm.y[3].endswith("(F1)") and hm.y[0].endswith("(accuracy)")
    lone = next(t for t in fig.data if len(t.y) == 1)
    assert list(lone.x) == list(hm.x) and lone.text[0][2].startswith("0.700")  # same columns for every model


def test_significance_marks_pairs_significant_in_every_seed(full):
    fig = figures.significance(full)
    hm = fig.data[0]
    # last-layer heads only, named by their pooling (the layer ablation's tests are in the report's table)
    assert all("@" not in h for h in hm.x)
    i, j = list(hm.y).index("mean"), list(hm.x).index("cls")
    assert hm.z[i][j] == 2 and "★" in hm.text[i][j] and hm.text[i][j].endswith("30:9")
    k = list(hm.x).index("pooler")
    assert hm.z[i][k] == 0 and "★" not in hm.text[i][k]


def _partials(full: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {
        "full": full,
        "empty": data.load([])[0],
        "one seed": full[full["seed"] == 0],
        "one pooling": full[full["pooling"] == "mean"],
        "no layers": full[full["layer"] == -1],
        "only layers": full[full["layer"] != -1],
        "no paired tests": full.assign(paired_tests=[[] for _ in range(len(full))]),
        "one task": full[full["task"] == "squad"],
        "nan values": full.assign(value=float("nan")),
        "missing columns": full.drop(columns=["value", "paired_tests"]),
        "malformed paired tests": full.assign(paired_tests=[[{"other": 3}] for _ in range(len(full))]),
        "not a frame": None,
    }


@pytest.mark.parametrize("name", list(figures.FIGURES))
def test_every_figure_builds_on_full_partial_and_empty_data(full, name):
    fn = figures.FIGURES[name]
    for case, df in _partials(full).items():
        fig = fn(df)
        assert isinstance(fig, go.Figure), case
        fig.to_json()  # serialisable, i.e. something a browser can draw
        if case in ("empty", "not a frame", "missing columns", "nan values"):
            assert not fig.data and fig.layout.annotations, (name, case)  # says what is missing
    assert "no layer records" in _titles(figures.layer_curves(_partials(full)["no layers"]))
    assert "no paired tests" in _titles(figures.significance(_partials(full)["no paired tests"]))
    assert "lacks columns: value" in _titles(figures.pooling_ablation(_partials(full)["missing columns"]))


def test_a_bug_becomes_a_figure_not_a_traceback(full, monkeypatch):
    monkeypatch.setattr(data, "aggregate", lambda df: 1 / 0)
    fig = figures.pooling_ablation(full)
    assert "ZeroDivisionError" in _titles(fig)


def test_metric_scale_from_values():
    assert figures.metric_title("accuracy", [0.7, 0.8]) == "accuracy (0–1)"
    assert figures.metric_title("f1", [55.0, 80.0]) == "F1 (0–100)"


# -- table -----------------------------------------------------------------------------------------------------

def test_filters_return_the_right_rows(full):
    t = table.leaderboard_table(full, task="sst2", pooling=["cls", "mean"])
    assert set(t["task"]) == {"sst2"} and set(t["pooling"]) == {"cls", "mean"}
    assert len(t) == 2 * 3 + 1  # cls and mean at three layers for the toy model, mean for the other
    assert list(t.loc[t["model"] == MODEL, "layer"]) == ["3", "5", "last", "3", "5", "last"]
    assert len(table.leaderboard_table(full, regime="pretrained")) == 2  # squad span + nsp head
    assert len(table.leaderboard_table(full, model=OTHER)) == 1
    assert len(table.leaderboard_table(full, model="all", task=[])) == len(data.aggregate(full))
    assert table.leaderboard_table(full, task="no such task").empty


def test_search_and_sort(full):
    t = table.leaderboard_table(full, search="SQUAD finetune")
    assert len(t) == 1 and t.iloc[0]["mean ± std"] == "85.0 ± 0.1"
    t = table.leaderboard_table(full, task="sst2", sort_by="mean", ascending=False)
    assert t.iloc[0]["pooling"] == "mean" and t.iloc[0]["mean"] == pytest.approx(0.81)
    assert list(t["mean"]) == sorted(t["mean"], reverse=True)


def test_csv_has_every_row(full, tmp_path):
    t = table.leaderboard_table(full)
    text = table.to_csv(t, tmp_path / "t.csv")
    back = pd.read_csv(io.StringIO(text))
    assert len(back) == len(t) == 17 and (tmp_path / "t.csv").read_text() == text
    assert back.loc[(back["task"] == "nsp") & (back["pooling"] == "nsp-head"), "mean"].iloc[0] == pytest.approx(0.97)


def test_choices_list_every_value(full):
    c = table.choices(full)
    assert c["task"] == ["nsp", "squad", "sst2"] and c["regime"] == ["finetune", "pretrained", "probe"]
    assert "nsp-head" in c["pooling"] and c["model"] == [MODEL, OTHER]


def test_views_applies_filters_and_keeps_all_choices(tmp_path):
    path = write(tmp_path / "r.jsonl", full_records())
    v = views(task="nsp", paths=[path])
    assert set(v["table"]["task"]) == {"nsp"} and v["n_records"] == 15
    assert set(v) >= {"ablation", "layers", "heatmap", "significance", "table", "csv", "choices", "problems"}
    assert v["choices"]["task"] == ["nsp", "squad", "sst2"]
    assert "no layer records" in _titles(v["layers"])
    assert v["csv"].count("\n") == len(v["table"]) + 1


# -- report ----------------------------------------------------------------------------------------------------

def unpacked(page: str) -> dict[str, str]:
    """Every pack of a report (leaderboard/packing.py), unpacked as the page's script does: gzip'd base64."""
    import base64
    import gzip

    found = re.findall(r'<script type="application/gzip;base64" id="([^"]+)">([^<]*)</script>', page)
    return {k: gzip.decompress(base64.b64decode(v)).decode("utf-8") for k, v in found}


def test_report_is_one_file_with_plotly_figures_and_csv_packed_inside(tmp_path):
    path = write(tmp_path / "r.jsonl", full_records())
    out = tmp_path / "report.html"
    result = subprocess.run([sys.executable, "-m", "leaderboard", "--out", str(out), str(path)], cwd=REPO,
                            capture_output=True, text=True, check=True)
    assert "wrote" in result.stdout and "49 records" in result.stdout and "report_files" not in result.stdout
    assert sorted(f.name for f in tmp_path.iterdir()) == ["r.jsonl", "report.html"]  # nothing beside it
    page = out.read_text()
    # nothing fetched from anywhere: no src, no link leaving the page
    assert re.search(r"<script[^>]*\ssrc=", page) is None
    assert "://" not in " ".join(re.findall(r'(?:src|href)="([^"]+)"', page))
    packs = unpacked(page)
    assert packs["pack-plotly"].startswith("/**") and "plotly.js v" in packs["pack-plotly"][:300]
    figs = json.loads(packs["pack-figures"])
    assert len(figs) == 10 and figs["ablation"]["data"]  # every figure, drawn when its section opens
    # the twins' pre-training curves, from the committed runs' files (gen1 published, gen2 in progress)
    assert {"wiki-bert-mini", "wiki-bert-mini-g2"} <= {t["name"] for t in figs["pretraining"]["data"]}
    assert page.count('data-fig="') == 10 and '"modeBarButtonsToRemove": ["sendChartToCloud"]' in page
    records = pd.read_csv(io.StringIO(packs["pack-records"]))
    assert sorted(records["run_id"]) == sorted(r.run_id for r in full_records())
    table_html = packs["pack-html-table"]
    for r in full_records():
        assert r.run_id in table_html  # in the table's record ids
        for s in (r.model, r.task, r.pooling):
            assert f"<td>{s}</td>" in table_html
    assert "python -m berteval run --task squad --pooling span" in table_html and "0123456789abcdef" in page
    assert "torch 2.13.0" in page
    assert pd.read_csv(io.StringIO(packs["pack-table"]))["run_ids"].str.len().min() > 0


# slow: the report of every committed record (about 12 CPU s); the report's parts are tested on small frames
@pytest.mark.slow
def test_report_of_the_committed_records_is_small_and_opens_on_the_answer(tmp_path):
    """The committed records' report (1.7 MB plus 14.1 MB beside it, 91,057 px tall, 3 min 04 s, issue 42): one
    file under 3 MB whose first screen answers each task, every other section closed until opened."""
    out, df, _ = report.write_report(tmp_path / "report.html", with_files=True)
    page = out.read_text()
    assert out.stat().st_size < 3_000_000, out.stat().st_size
    body = page[page.index("<body>"):]
    first = body.index('id="answer"')
    assert first < body.index("<nav>") < body.index('id="findings"')
    answer = body[first:body.index('<details id="every-model"', first)]
    for task in ("SST-2", "NSP", "MRPC", "RTE", "STS-B", "QNLI", "SQuAD"):  # a row per task, on the first screen
        assert f"<td>{task}" in answer, task
    assert "the three vectors on all-MiniLM-L6-v2" in answer  # the reference encoder, not the shortest name
    every = body[body.index('<details id="every-model"'):body.index("</details>", body.index('id="every-model"'))]
    for words in ("<th>cls</th><th>pooler</th><th>mean</th>", "The best head measured is"):
        assert words in every
    # every section after the answer is closed: its heading shows, its body opens on demand
    sections = re.findall(r'<details id="([^"]+)" class="section">', body)
    assert {"findings", "models", "heatmap", "table", "disagreements", "provenance"} <= set(sections)
    assert " open" not in "".join(re.findall(r"<details[^>]*>", body))
    shown = unpacked(page)["pack-html-disagreements"]
    assert "disagreements: A right / B right" in shown and "k-fold" in body[body.index('id="estimates"'):]
    # --with-files: every disagreeing example of a model, task and regime in a CSV beside the page, linked from it
    linked = re.findall(r'href="report_files/(disagreements-[^"]+\.csv)"', shown)
    assert "disagreements-sst2-all-MiniLM-L6-v2-probe.csv" in linked
    every = pd.concat([pd.read_csv(tmp_path / "report_files" / name) for name in linked])
    assert len(every) > 10 * shown.count("<tr>")  # the page shows a few, the files hold them all
    assert set(every["task"]) <= {"sst2", "nsp", "mrpc", "rte", "qnli"}  # McNemar-tested pairs only


def test_report_of_nothing_still_writes(tmp_path):
    out, df, problems = report.write_report(tmp_path / "empty.html", [tmp_path / "none.jsonl"])
    page = out.read_text()
    assert df.empty and len(problems) == 1 and "no result records yet" in page


def test_report_escapes_record_strings(tmp_path):
    path = write(tmp_path / "r.jsonl", [rec(model="<b>evil</b>")])
    page = report.build_html(*data.load([path]))
    markup = re.sub(r"<script.*?</script>", "", page, flags=re.S)  # figures carry it as JSON data
    assert "<b>evil</b>" not in markup
    assert "‹b›evil‹/b›" in page  # records are untrusted: their '<' '>' become look-alikes (berteval.markup)


def test_leaderboard_does_not_import_gradio():
    code = "import sys, leaderboard, leaderboard.report; assert 'gradio' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


def test_record_json_is_what_append_record_writes(tmp_path):
    # guards the toy helper: the reader must accept exactly these lines
    path = write(tmp_path / "r.jsonl", [rec()])
    assert json.loads(path.read_text())["pooling"] == "cls"


def test_report_shows_paths_relative_to_where_it_was_built(monkeypatch, tmp_path):
    monkeypatch.chdir(REPO)
    assert report.shown_path(str(data.RESULTS_DIR / "sst2.jsonl")) == "leaderboard/results/sst2.jsonl"
    assert report.shown_path(str(tmp_path / "x.jsonl")) == str(tmp_path / "x.jsonl")  # outside: kept whole


# -- rank bands, findings, models side by side, references, disagreements, records from a dataset repo ---------

def test_holm_adjusts_in_step_down_order():
    # m = 4: sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1, made monotone.
    assert bands.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert bands.holm([0.5, 0.9]) == [1.0, 1.0] and bands.holm([]) == []


def test_rank_bands_separate_only_what_every_seed_and_holm_separate(full):
    b = bands.rank_bands(full)
    sst2 = b[(b["model"] == MODEL) & (b["task"] == "sst2") & (b["regime"] == "probe") & (b["layer"] == -1)]
    band = dict(zip(sst2["pooling"], sst2["band"]))
    # mean vs cls: p = 0.002 in every seed, x6 pairs (Holm) = 0.012 < 0.05; every other pair p = 0.4.
    assert band == {"mean": 1, "max": 1, "pooler": 1, "cls": 2}
    assert sst2["basis"].str.contains("Holm over 6 pairs").all()
    t = bands.pair_tests(full)
    row = t[(t["model"] == MODEL) & (t["task"] == "sst2") & (t["head_1"] == "cls@last") & (t["head_2"] == "mean@last")]
    assert row.iloc[0]["p_holm"] == pytest.approx(0.012) and row.iloc[0]["better"] == "mean@last"
    # One seed disagreeing in direction is enough to keep a pair together.
    recs = full_records()
    flipped = [r if not (r.pooling == "mean" and r.seed == 2 and r.layer == -1 and r.task == "sst2" and r.model == MODEL)
               else rec(pooling="mean", seed=2, value=0.82,
                        paired=[paired("cls", p=0.002, a=3, b=10), paired("pooler", p=0.4)]) for r in recs]
    df, _ = data.load([write(Path(tempfile.mkdtemp()) / "f.jsonl", flipped)])
    b2 = bands.rank_bands(df)
    assert set(b2[(b2["model"] == MODEL) & (b2["task"] == "sst2") & (b2["layer"] == -1)]["band"]) == {1}
    # The band is in the table (from all records: a filter never changes it) and in the ablation figure.
    tab = views(task="sst2", pooling=["cls", "mean"], paths=[full["file"].iloc[0]])["table"]
    shown = tab[(tab["model"] == MODEL) & (tab["regime"] == "probe") & (tab["layer"] == "last")]
    assert dict(zip(shown["pooling"], shown["band"])) == {"cls": 2, "mean": 1}
    texts = [t for trace in figures.pooling_ablation(full).data if trace.text is not None for t in trace.text]
    assert "b2" in texts and "b1" in texts


def test_every_table_row_shows_its_reproduce_command_and_record_ids(full):
    tab = table.leaderboard_table(full)
    row = tab[(tab["model"] == MODEL) & (tab["task"] == "sst2") & (tab["pooling"] == "mean") & (tab["layer"] == "last")]
    assert row.iloc[0]["run_ids"].split() == [f"{MODEL}-sst2-mean-probe--1-{s}-100" for s in (0, 1, 2)]
    assert row.iloc[0]["reproduce"] == "python -m berteval run --task sst2 --pooling mean"
    assert (tab["reproduce"] != "").all() and (tab["run_ids"] != "").all()


def test_findings_are_generated_from_the_records_and_follow_them(tmp_path):
    path = write(tmp_path / "r.jsonl", full_records())
    first = findings.findings(data.load([path])[0])
    sst2 = next(f for f in first if f["task"] == "sst2" and f["model"] == MODEL and f["regime"] == "probe")
    # mean 0.81 over max 0.79 by 2.0 points (every seed), over cls by 5.0 with Holm p = 0.012.
    assert sst2["sentence"].startswith("SST-2, frozen probe, bert-base: `mean` 0.810, ahead of `max` by 2.0 points")
    assert "of `cls` by 5.0 points" in sst2["sentence"] and "(Holm p = 0.012)" in sst2["sentence"]
    assert "not significant" in sst2["sentence"]
    squad = next(f for f in first if f["task"] == "squad" and f["regime"] == "finetune")
    assert "`span` F1 85.0 (the only head measured here; 3 seeds)" in squad["sentence"]
    # Change one record file: the mean head loses 10 points in every seed, and the sentence changes with it.
    changed = [r if r.pooling != "mean" or r.task != "sst2" or r.layer != -1 or r.model != MODEL
               else rec(pooling="mean", seed=r.seed, value=r.main_value - 0.10, paired=r.paired_tests) for r in full_records()]
    again = findings.findings(data.load([write(tmp_path / "changed.jsonl", changed)])[0])
    sst2b = next(f for f in again if f["task"] == "sst2" and f["model"] == MODEL and f["regime"] == "probe")
    assert sst2b["sentence"] != sst2["sentence"] and sst2b["best"] == "max"
    assert sst2b["sentence"].startswith("SST-2, frozen probe, bert-base: `max` 0.790, ahead of `cls` by 3.0 points")
    assert views(paths=[path])["findings"].startswith("- SST-2, frozen probe, bert-base: `mean` 0.810")


def _three_models():
    """Toy records of a base model and two derived encoders named as berteval names them."""
    base = "sentence-transformers/all-MiniLM-L6-v2"
    out = []
    for model, shift in ((base, 0.0), (f"{base}+nsp-pooler", 0.02), (f"{base}+random", -0.15)):
        for seed, off in SEED_OFFSET.items():
            for pooling in ("cls", "pooler", "mean"):
                bump = shift if pooling == "pooler" else 0.0
                out.append(rec(model=model, pooling=pooling, seed=seed, value=SST2[pooling] + off + bump
                               + (shift if "random" in model else 0.0)))
        out.append(rec(model=model, pooling="pooler", regime="finetune", seed=0, value=0.84 + shift))
        out.append(rec(model=model, pooling="cls", regime="finetune", seed=0, value=0.84))
    return out


def test_models_side_by_side_view_and_the_pooler_minus_cls_effect(tmp_path):
    df, _ = data.load([write(tmp_path / "m.jsonl", _three_models())])
    tab = compare.model_pooling_table(df)
    probe = tab[(tab["task"] == "sst2") & (tab["regime"] == "probe")]
    assert len(probe) == 3 and list(tab.columns[3:6]) == ["cls", "pooler", "mean"]
    assert probe.set_index("model").loc["sentence-transformers/all-MiniLM-L6-v2+nsp-pooler", "pooler"] == \
        "0.770 ± 0.010 (3)"
    eff = compare.pooler_minus_cls(df).set_index(["model", "regime"])
    nsp = eff.loc[("sentence-transformers/all-MiniLM-L6-v2+nsp-pooler", "probe")]
    # pooler - cls per seed: 0.75 + 0.02 - 0.76 = +1.0 point in every seed; the interval collapses on it.
    assert nsp["differences"] == "+1.00, +1.00, +1.00" and nsp["mean"] == pytest.approx(1.0)
    assert nsp["ci95_low"] == pytest.approx(1.0) and nsp["ci95_high"] == pytest.approx(1.0)
    one = eff.loc[("sentence-transformers/all-MiniLM-L6-v2+random", "finetune")]
    assert one["n_seeds"] == 1 and math.isnan(one["ci95_low"])  # one seed: a difference, no interval
    fig = compare.model_pooling_figure(df)
    names = {t.name for t in fig.data}
    assert {"all-MiniLM-L6-v2", "all-MiniLM-L6-v2+nsp-pooler", "all-MiniLM-L6-v2+random"} <= names
    stars = [t for t in fig.data if t.name == "published (not ranked)"]
    assert stars and all(t.marker.symbol == "star-open" for t in stars)
    drawn = sorted(round(y, 4) for t in stars for y in t.y)
    # SST-2 probe (Sentence-BERT cls, mean), fine-tune (BERT with and without NSP, BERT-Mini, RoBERTa's two inputs)
    assert drawn == [0.8413, 0.844, 0.859, 0.926, 0.927, 0.927, 0.929]
    effect = compare.pooler_effect_figure(df)
    assert "pooler minus cls" in effect.layout.title.text and len(effect.data) == 1 + len(eff)
    assert "nothing" not in _titles(compare.pooler_effect_figure(df))
    assert "no model has both" in _titles(compare.pooler_effect_figure(df[df["pooling"] != "pooler"]))


def test_references_carry_citations_and_stay_out_of_ranks_findings_and_table(full):
    refs = references.references()
    assert len(refs) == 25 and refs["citation"].str.contains(r"(?:Devlin|Reimers|Turc|Liu|Sanh) .* 2019").all()
    first = refs[refs["citation"].str.match(r"(?:Devlin|Reimers)") & refs["task"].isin(["sst2", "squad"])]
    got = {(r.where.split(" (")[0], r.task, r.pooling, r.metric, "No NSP" in r.where): r.value for r in first.itertuples()}
    # the pair-task rows (issue 25), each as printed in its source
    pairs = {(r.citation.split(" ")[0], r.task, r.metric, "No NSP" in r.where or "no NSP" in r.model): r.value
             for r in refs[~refs.index.isin(first.index)].itertuples()}
    assert pairs[("Devlin", "mrpc", "accuracy", False)] == 86.7 and pairs[("Devlin", "mrpc", "accuracy", True)] == 86.5
    assert pairs[("Devlin", "qnli", "accuracy", False)] == 88.4 and pairs[("Devlin", "qnli", "accuracy", True)] == 84.9
    assert pairs[("Turc", "stsb", "pearson", False)] == 75.4 and pairs[("Turc", "rte", "accuracy", False)] == 57.9
    assert pairs[("Liu", "squad", "f1", False)] == 90.4 and pairs[("Liu", "squad", "f1", True)] == 90.6
    assert got == {("Table 5", "sst2", "pooler", "accuracy", False): 92.7, ("Table 5", "sst2", "pooler", "accuracy", True): 92.6,
                   ("Table 2", "squad", "span", "exact_match", False): 80.8,
                   ("Table 2", "squad", "span", "f1", False): 88.5, ("Table 5", "squad", "span", "f1", True): 87.9,
                   ("Table 5", "sst2", "cls", "accuracy", False): 84.13, ("Table 5", "sst2", "mean", "accuracy", False): 84.40}
    v = views(paths=[full["file"].iloc[0]])
    assert "BERT" not in " ".join(v["table"]["model"]) and "BERT" not in v["findings"]
    assert list(v["references"].columns)[:2] == ["published model", "task"]


def test_the_answer_tabs_squad_anchors_are_the_reference_rows_with_their_sizes():
    text = references.squad_scale()
    assert "BERT-base (110M parameters) F1 88.5 (Devlin et al. 2019, Table 2)" in text
    assert "DistilBERT (66M) F1 85.8 (Sanh et al. 2019, Table 2 of arXiv v4)" in text
    assert "not measured here" in text


def test_report_opens_with_the_answer_then_findings_models_figures_bands_and_examples(tmp_path):
    page = report.build_html(*data.load([write(tmp_path / "r.jsonl", full_records())]))
    body = page[page.index("<body>"):]
    order = [body.index(s) for s in ('id="answer"', 'id="findings"', 'id="models"', 'id="ablation"', 'id="bands"',
                                      'id="estimates"', 'id="disagreements"')]
    assert order == sorted(order)
    assert "Holm" in body and "published numbers" in body.lower() and "Devlin et al. 2019" in body


def test_disagreement_view_in_the_leaderboard_matches_the_records():
    df, _ = data.load()
    model = "sentence-transformers/all-MiniLM-L6-v2"
    assert {"mean", "cls", "mean@5"} <= set(disagreements.heads(df, "sst2", model, "probe", 0))
    summary, tab = disagreements.view(df, "sst2", model, "probe", 0, "mean", "cls", data_dir=None, limit=5)
    mean = df[(df["model"] == model) & (df["regime"] == "probe") & (df["pooling"] == "mean") & (df["layer"] == -1)
              & (df["seed"] == 0) & (df["task"] == "sst2")]
    mean = mean[mean["n_train"] == mean["n_train"].max()]  # the full-data head, not a learning-curve point
    test = next(t for t in mean.iloc[0]["paired_tests"] if t["other"]["pooling"] == "cls" and t["other"]["layer"] == -1)
    won, lost = test["n_only_self_correct"], test["n_only_other_correct"]
    assert f"{won + lost} disagreements: mean right cls wrong {won}, cls right mean wrong {lost}" in summary
    assert f"McNemar test counted {won} and {lost}" in summary and len(tab) == 10
    assert list(tab.columns) == ["right", "id", "gold", "mean says", "cls says", "text"]
    msg, empty = disagreements.view(df, "sst2", model, "probe", 0, "mean", "mean")
    assert "two different heads" in msg and empty.empty
    msg, _ = disagreements.view(df, "sst2", model, "probe", 0, "mean", "nonsense")
    assert msg.startswith("⚠️ no record of nonsense")


def test_records_from_a_dataset_repo_through_snapshot_download(tmp_path, monkeypatch):
    import huggingface_hub

    snap = tmp_path / "snapshot"
    write(snap / "sst2.jsonl", [rec(model="hub/model", pooling="mean", value=0.9)])
    calls = []

    def fake_snapshot_download(**kw):  # stands in for the hub: the local folder is the "downloaded" snapshot
        calls.append(kw)
        return str(snap)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    monkeypatch.setenv(data.REPO_ENV, "someone/berteval-results@v2")
    df, problems = data.load()
    assert problems == [] and list(df["model"]) == ["hub/model"]
    assert calls == [{"repo_id": "someone/berteval-results", "repo_type": "dataset", "revision": "v2",
                      "allow_patterns": ["*.jsonl", "predictions/**"]}]
    assert views(repo="someone/other")["n_records"] == 1 and calls[-1]["repo_id"] == "someone/other"

    def offline(**kw):
        raise OSError("the hub is not reachable")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    df, problems = data.load()
    assert len(problems) == 1 and "cannot read the records of dataset repo someone/berteval-results" in str(problems[0])
    assert not df.empty and "hub/model" not in set(df["model"])  # the local results, and the page says why
