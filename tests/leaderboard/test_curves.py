"""leaderboard.figures.curves on toy records: learning curves never average sizes, every layer draws every pooling,
span QA per-token beside one-vector heads; every figure fails soft."""

from __future__ import annotations

import plotly.graph_objects as go

from berteval import records
from leaderboard import data
from leaderboard.figures import curves

MODEL = "toy/minilm"


def rec(pooling="cls", seed=0, layer=-1, regime="probe", n_train=100, value=0.8, task="sst2", metrics=None,
        dtype="fp32", metric="accuracy"):
    return records.RunRecord(
        schema_version=records.SCHEMA_VERSION, run_id=f"{task}-{pooling}-{regime}-{layer}-{seed}-{n_train}-{dtype}",
        timestamp="2026-12-03T00:00:00+00:00", model=MODEL, model_revision="rev1", task=task, task_version="1",
        data_sha256="ab" * 32, split="validation", pooling=pooling, regime=regime, layer=layer, seed=seed,
        metrics=metrics or {metric: value}, main_metric=metric, n_train=n_train, n_eval=50,
        config={"command": "python -m berteval run ..."}, versions={"berteval": "0.1.0"},
        git_commit="0123456789abcdef", device="cpu", dtype=dtype, wall_s=1.0)


def frame(recs) -> "data.pd.DataFrame":
    return data.frame([data._row(r, "toy.jsonl") for r in recs])


def _traces(fig: go.Figure, kind=go.Scatter, mode="lines+markers"):
    return [t for t in fig.data if isinstance(t, kind) and (mode is None or t.mode == mode)]


def test_learning_curve_one_point_per_size_with_bands():
    recs = [rec(p, s, n_train=n, value=base + n / 1e5 + s / 100)
            for p, base in (("cls", 0.6), ("mean", 0.7)) for n in (29, 115, 461) for s in range(3)]
    recs += [rec("mean", s, regime="finetune", n_train=n, value=0.75 + s / 100) for n in (115, 461) for s in range(2)]
    recs += [rec("max", 0, n_train=65349)]  # one size only: no curve
    fig = curves.learning_curves(frame(recs))
    lines = {t.name: t for t in _traces(fig)}
    assert set(lines) == {"cls · frozen probe", "mean · frozen probe", "mean · fine-tuned"}  # regimes in words
    assert list(lines["mean · frozen probe"].x) == [29, 115, 461]  # sizes sorted, never averaged together
    assert abs(lines["mean · frozen probe"].y[0] - (0.7 + 29 / 1e5 + 0.01)) < 1e-9  # the mean of that size's seeds
    assert lines["mean · fine-tuned"].line.dash == "dash" and lines["cls · frozen probe"].line.dash == "solid"
    assert len([t for t in fig.data if t.fill == "toself"]) == 3  # one interval band per line
    assert fig.layout.xaxis.type == "log"


def test_every_layer_draws_all_poolings_in_the_main_setup():
    recs = [rec(p, s, layer=layer, n_train=1000, value=0.7 + 0.01 * (layer % 7)) for p in ("cls", "mean", "max")
            for layer in (0, 1, 2, -1) for s in range(2)]
    recs += [rec("cls", s, n_train=29, value=0.5) for s in range(2)]  # a learning-curve point: not this figure
    fig = curves.every_layer(frame(recs))
    lines = {t.name: t for t in _traces(fig)}
    assert set(lines) == {"cls", "mean", "max"}
    assert list(lines["max"].x) == ["0", "1", "2", "last"]


def test_span_vector_sets_per_token_beside_one_vector_heads():
    qa = dict(task="squad", metric="f1")
    recs = [rec("span", 0, n_train=3939, metrics={"exact_match": 5.0, "f1": 11.0}, **qa)]
    recs += [rec(p, s, n_train=3939, metrics={"exact_match": 1.0 + s, "f1": 3.0 + s}, **qa)
             for p in ("cls", "mean") for s in range(3)]
    heads = curves.span_heads(frame(recs))
    assert list(heads.sort_values("pooling")["pooling"]) == ["cls", "mean", "span"]
    assert heads.set_index("pooling").loc["cls", "f1"] == 4.0
    fig = curves.span_vector(frame(recs))
    bars = [t for t in fig.data if isinstance(t, go.Bar)]
    assert [b.name for b in bars] == ["exact match", "F1"]
    assert list(bars[1].x) == ["every token", "one vector: cls", "one vector: mean"]


def test_curves_fail_soft_and_say_what_is_missing():
    empty = frame([rec("cls", 0)])
    for name, fn in curves.FIGURES.items():
        fig = fn(empty)
        assert fig.layout.annotations and "python -m berteval run" in fig.layout.annotations[0].text, name
        assert "no records loaded" in fn(None).layout.annotations[0].text, name
