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

import pandas as pd
import plotly.graph_objects as go
import pytest

from berteval import records, store
from berteval.stats import summarise
from conftest import REPO
from leaderboard import data, figures, report, table, views

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
    means = next(t for t in figures.pooling_ablation(df).data if t.name == "mean of seeds")
    assert sorted(means.x[1]) == ["cls (train 10)", "cls (train 100)"]


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
    assert "sst2 · toy/bert-base" in _titles(fig) and "squad · toy/bert-base" in _titles(fig)
    # panels in task order (nsp, squad, sst2, sst2 for the second model): two traces each
    means = fig.data[4]
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
    row = next(i for i, y in enumerate(hm.y) if y.startswith("sst2 · probe"))
    assert hm.z[row][2] == 1.0 and hm.z[row][1] == 0.0  # mean best, pooler worst within the task
    assert hm.text[row][2].startswith("0.810")
    # rows: tasks alphabetically, regimes probe -> finetune -> pretrained; each names its metric
    assert [y.split("<br>")[0] for y in hm.y] == ["nsp · probe", "nsp · pretrained", "squad · probe",
                                                  "squad · finetune", "squad · pretrained", "sst2 · probe"]
    assert hm.y[2].endswith("(F1)") and hm.y[0].endswith("(accuracy)")
    lone = next(t for t in fig.data if len(t.y) == 1)
    assert list(lone.x) == list(hm.x) and lone.text[0][2].startswith("0.700")  # same columns for every model


def test_significance_marks_pairs_significant_in_every_seed(full):
    fig = figures.significance(full)
    hm = fig.data[0]
    i, j = list(hm.y).index("mean@last"), list(hm.x).index("cls@last")
    assert hm.z[i][j] == 2 and "★" in hm.text[i][j] and hm.text[i][j].endswith("30:9")
    k = list(hm.x).index("pooler@last")
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
    monkeypatch.setattr(figures.data, "aggregate", lambda df: 1 / 0)
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

def test_report_is_self_contained_and_names_every_record(tmp_path):
    path = write(tmp_path / "r.jsonl", full_records())
    out = tmp_path / "report.html"
    result = subprocess.run([sys.executable, "-m", "leaderboard", "--out", str(out), str(path)], cwd=REPO,
                            capture_output=True, text=True, check=True)
    assert "wrote" in result.stdout and "49 records" in result.stdout
    page = out.read_text()
    assert re.search(r"<script[^>]*\ssrc=", page) is None  # nothing fetched from the network
    assert "plotly.js v" in page and page.count("Plotly.newPlot") == 4
    assert page.count('"modeBarButtonsToRemove": ["sendChartToCloud"]') == 4  # no upload button offline
    for r in full_records():
        assert r.run_id in page
        for s in (r.model, r.task, r.pooling):
            assert f"<td>{s}</td>" in page
    assert "python -m berteval run --task squad --pooling span" in page and "0123456789abcdef" in page
    assert "torch 2.13.0" in page and "data:text/csv" in page


def test_report_of_nothing_still_writes(tmp_path):
    out, df, problems = report.write_report(tmp_path / "empty.html", [tmp_path / "none.jsonl"])
    page = out.read_text()
    assert df.empty and len(problems) == 1 and "no result records yet" in page


def test_report_escapes_record_strings(tmp_path):
    path = write(tmp_path / "r.jsonl", [rec(model="<b>evil</b>")])
    page = report.build_html(*data.load([path]))
    markup = re.sub(r"<script.*?</script>", "", page, flags=re.S)  # figures carry it as JSON data
    assert "<b>evil</b>" not in markup
    assert "&lt;b&gt;evil&lt;/b&gt;" in page


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
