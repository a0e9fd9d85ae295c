"""leaderboard.twins: the NSP twin against the no-NSP twin, paired by seed, generated from records."""

from __future__ import annotations

import math

import pytest

from berteval import store
from berteval.stats import summarise
from conftest import make_record, records_frame
from leaderboard import data, twins

NSP, NO = twins.NSP, twins.NO_NSP
# accuracy per twin and seed: NSP ahead on pooler by 2, 3, 4 points; behind on mean by 1 point every seed
VALUES = {("pooler", NSP): [0.72, 0.73, 0.74], ("pooler", NO): [0.70, 0.70, 0.70],
          ("mean", NSP): [0.80, 0.81, 0.82], ("mean", NO): [0.81, 0.82, 0.83]}


def _frame(tmp_path, extra=()):
    path = tmp_path / "r.jsonl"
    recs = [make_record(run_id=f"{m}-{p}-{s}", model=m, pooling=p, seed=s, metrics={"accuracy": v})
            for (p, m), vs in VALUES.items() for s, v in enumerate(vs)]
    return records_frame(path, [*recs, *extra])


def test_difference_is_paired_by_seed_with_a_t_interval(tmp_path):
    comp = twins.comparison(_frame(tmp_path)).set_index("pooling")
    assert list(comp.index) == ["pooler", "mean"]  # the question's order, not alphabetical
    expect = summarise([2.0, 3.0, 4.0])
    row = comp.loc["pooler"]
    assert row["diff"] == pytest.approx(expect.mean)
    assert (row["diff_low"], row["diff_high"]) == pytest.approx((expect.ci95_low, expect.ci95_high))
    assert row["nsp_mean"] == pytest.approx(0.73) and row["nonsp_std"] == pytest.approx(0.0)
    mean = comp.loc["mean"]  # the same -1 point on every seed: a zero-width interval below 0
    assert mean["diff"] == pytest.approx(-1.0) and mean["diff_high"] == pytest.approx(-1.0)


def test_sentences_and_markdown_say_who_is_ahead_and_print_published_rows_apart(tmp_path):
    df = _frame(tmp_path)
    text = twins.as_markdown(df)
    assert "`pooler` 0.730 vs 0.700 (+3.0 points [95% CI" in text and "NSP ahead" in text
    assert "`mean` 0.810 vs 0.820 (-1.0 points" in text and "no-NSP ahead" in text
    published = text.split("Published, drawn apart")[1]
    assert "92.6" in published and "Table 5 (No NSP)" in published  # BERT's SST-2 without NSP
    assert "0.730" not in published  # measured rows never mixed into the published list
    assert "MRPC" not in published  # only the tasks the measured rows show


def test_a_cell_only_one_twin_holds_is_left_out_and_no_twins_says_what_to_run(tmp_path):
    only = make_record(run_id="head", model=NSP, task="nsp", pooling="nsp-head", regime="pretrained",
                       metrics={"accuracy": 0.9})
    comp = twins.comparison(_frame(tmp_path, [only]))
    assert set(comp["task"]) == {"sst2"}
    empty = twins.as_markdown(data.frame([]))
    assert "No twin records yet" in empty and "pretrain" in empty


def test_one_seed_has_no_interval(tmp_path):
    path = tmp_path / "one.jsonl"
    for m, v in ((NSP, 0.6), (NO, 0.5)):
        store.append_record(path, make_record(run_id=m, model=m, metrics={"accuracy": v}))
    df, _ = data.load([path])
    row = twins.comparison(df).iloc[0]
    assert row["diff"] == pytest.approx(10.0) and math.isnan(row["diff_low"])
    assert "one seed: no interval" in twins.sentences(twins.comparison(df))[0]
    shown = twins.display(twins.comparison(df)).iloc[0]  # one seed has no spread to print, not a spread of 0
    assert (shown["with NSP"], shown["without NSP"], shown["seeds"]) == ("0.600", "0.500", 1)


def test_command_prints_markdown(tmp_path, capsys):
    _frame(tmp_path)
    assert twins.main([str(tmp_path / "r.jsonl")]) == 0
    assert "| SST-2 | frozen probe | `pooler` |" in capsys.readouterr().out


def test_report_has_the_twins_section_and_escapes_record_fields(tmp_path):
    from leaderboard import report

    bad = "x<img src=x onerror=alert(1)>"
    extra = [make_record(run_id=f"bad-{m}", model=m, pooling=bad, metrics={"accuracy": 0.5}) for m in (NSP, NO)]
    _frame(tmp_path, extra)
    out, _, _ = report.write_report(tmp_path / "report.html", [tmp_path / "r.jsonl"], "t")
    page = out.read_text()
    section = page.split('<details id="twins" class="section">')[1].split("</details>")[0]
    assert "+3.0 [95% CI" in section and "92.6" in section
    assert "<img" not in section
