"""Every figure reads the table's cells (issue 42, item 5): one selection (leaderboard.cells) behind the table, the
first view and each figure, so a number drawn anywhere is a row of the table for the same filter.

Each figure carries, on the traces that draw cell means, the record ids of each point (`customdata`, the table's
`run_ids`); these tests look every drawn number up in the table by those ids. Toy records show the bug the
heatmap had (learning-curve sizes with more seeds than the full training set); the committed records are checked
for the filters a visitor uses first. Offline, no Gradio.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from leaderboard import board, cells, overview
from test_leaderboard import rec, write

# Figures whose points are table cells, by the filter that must give each some: the test fails if a figure stops
# marking its cells, instead of passing on nothing.
DRAWS_CELLS = {
    "sst2": ["ablation", "layers", "heatmap", "models", "learning_curves", "every_layer", "pooler_effect"],
    "nsp": ["ablation", "heatmap", "models", "pooler_effect"],
    "squad": ["ablation", "heatmap", "models", "span_vector"],
}


def _drawn(fig) -> list[tuple[str, float, str]]:
    """(run_ids, the number drawn, trace type) for every point of every trace that marks its cells."""
    out = []
    for t in fig.data:
        ids = t.customdata
        if ids is None:
            continue
        if t.type == "heatmap":  # the number is the cell's text ("0.810<br>±0.004"); colour is a within-row rank
            for id_row, text_row in zip(ids, t.text):
                out += [(i, float(txt.split("<br>")[0]), "heatmap") for i, txt in zip(id_row, text_row) if i]
        elif t.type == "bar":
            out += [(i, float(y), "bar") for i, y in zip(ids, t.y)]
        elif t.name == "mean difference":  # pooler_effect: x is pooler minus cls, ids are [pooler ids, cls ids]
            out += [(tuple(i), float(x), "effect") for i, x in zip(ids, t.x)]
        else:
            out += [(i, float(y), "scatter") for i, y in zip(ids, t.y)]
    return out


def _check_against_table(fig, tab: pd.DataFrame, name: str) -> int:
    """Assert each drawn number equals its table row's mean; return how many were checked."""
    by_ids = tab.set_index("run_ids")
    drawn = _drawn(fig)
    for ids, value, kind in drawn:
        if kind == "effect":
            p, c = (by_ids.loc[i] for i in ids)
            if p["seeds"] != c["seeds"]:
                continue  # paired on the seeds both have: not a difference of the two rows' means
            points = 100.0 if abs(p["mean"]) <= 1 else 1.0
            assert value == pytest.approx((p["mean"] - c["mean"]) * points, abs=1e-9), (name, ids)
            continue
        assert ids in by_ids.index, f"{name}: a point drawn from records no table row holds: {ids}"
        want = float(by_ids.loc[ids, "mean"])
        # the heatmap writes 3 decimals (0-1) or 1 (0-100): equal to the table's mean as written
        tol = (0.05 if abs(want) > 1 else 5e-4) if kind == "heatmap" else 1e-9
        assert math.isclose(value, want, abs_tol=tol), (name, ids, value, want)
    return len(drawn)


def _toy(tmp_path):
    """A full training set (n_train 1,000, 3 seeds) beside learning-curve sizes with MORE seeds (5): the old heatmap
    took the most-seeded setup and showed a 100-sentence cell as the model's score."""
    out = []
    for seed in range(3):
        for pooling, v in (("cls", 0.76), ("pooler", 0.75), ("mean", 0.81)):
            out.append(rec(pooling=pooling, seed=seed, value=v + 0.001 * seed, n_train=1000))
    for n_train, drop in ((100, 0.15), (300, 0.08)):
        for seed in range(5):
            for pooling, v in (("cls", 0.76), ("pooler", 0.75), ("mean", 0.81)):
                out.append(rec(pooling=pooling, seed=seed, value=v - drop, n_train=n_train))
    out.append(rec(pooling="max", seed=0, value=0.5, n_train=100))  # a pooling measured on a small set only
    return write(tmp_path / "r.jsonl", out)


def test_the_heatmap_reads_the_full_training_set_not_the_most_seeded_size(tmp_path):
    b = board.current([_toy(tmp_path)])
    fig = b.figure("heatmap")
    hm = fig.data[0]
    assert [t.split("<br>")[0] for t in hm.text[0]] == ["0.761", "0.751", "0.811"]  # n_train 1,000, not 100
    assert _check_against_table(fig, b.table(), "heatmap") == 3


def test_every_figure_and_the_first_view_read_the_same_cells_as_the_table(tmp_path):
    b = board.current([_toy(tmp_path)])
    tab = b.table()
    assert len(tab) == 10  # every setup is a table row: 3 poolings x 3 sizes, and max on 100
    main = tab[tab["n_train"] == 1000].set_index("pooling")["mean"]
    for name in board.FIGURE_FUNCTIONS:
        _check_against_table(b.figure(name), tab, name)
    curve = b.figure("learning_curves")
    assert _check_against_table(curve, tab, "learning_curves") == 9  # each size of each pooling, max has one size
    ablation = b.figure("ablation")
    assert _check_against_table(ablation, tab, "ablation") == 3
    first = overview.overview(b.rows(), b.band_frame, b.tests)[0]["table"].iloc[0]
    assert [float(first[p].strip("*")) for p in ("cls", "pooler", "mean")] == \
        [round(main[p], 3) for p in ("cls", "pooler", "mean")]


def test_a_pooling_filter_never_moves_a_cell_to_another_setup(tmp_path):
    b = board.current([_toy(tmp_path)])
    # `max` exists at n_train 100 only: under a pooling filter it is still not the model's full-set score
    assert b.table(pooling="max")["n_train"].tolist() == [100]
    assert not _drawn(b.figure("heatmap", pooling="max"))
    assert cells.select(b.rows(pooling="max"), "main").empty
    assert list(cells.select(b.rows(pooling="max"), "all")["n_train"]) == [100]


@pytest.mark.parametrize("task", sorted(DRAWS_CELLS))
def test_the_committed_figures_draw_the_tables_numbers(task):
    b = board.current()
    tab = b.table(task=task)
    for name in board.FIGURE_FUNCTIONS:
        n = _check_against_table(b.figure(name, task=task), tab, name)
        if name in DRAWS_CELLS[task]:
            assert n > 0, f"{name} marks no cell for task={task}"


def test_the_first_view_speaks_of_the_reference_encoder_the_default_model_loads():
    """overview.REFERENCE_MODEL spells out what `--model default` records (the loader's id imports torch, which the
    leaderboard must not); the committed records agree: their `default` runs carry that model id."""
    from berteval.records import read_records
    from conftest import REPO

    recs, _ = read_records([REPO / "leaderboard" / "results" / "sst2.jsonl"])
    assert {r.model for r in recs if r.config.get("model_source") == "default"} == {overview.REFERENCE_MODEL}
