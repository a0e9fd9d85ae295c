"""leaderboard.twins: each pair of twins (berteval.models.twins), the NSP model against its control, paired by seed,
and the pre-training seed spread, generated from records."""

from __future__ import annotations

import math

import pytest

from berteval import store
from berteval.models.derived import VARIANTS
from berteval.models.pretrained import PRETRAINED
from berteval.models.twins import MAIN, TWINS, record_id, spread_pairs
from berteval.stats import summarise
from conftest import make_record, records_frame
from leaderboard import data, twins

NSP, NO = TWINS["gen1"].models
# accuracy per twin and seed: NSP ahead on pooler by 2, 3, 4 points; behind on mean by 1 point every seed
VALUES = {("pooler", NSP): [0.72, 0.73, 0.74], ("pooler", NO): [0.70, 0.70, 0.70],
          ("mean", NSP): [0.80, 0.81, 0.82], ("mean", NO): [0.81, 0.82, 0.83]}


def _frame(tmp_path, extra=()):
    path = tmp_path / "r.jsonl"
    recs = [make_record(run_id=f"{m}-{p}-{s}", model=m, pooling=p, seed=s, metrics={"accuracy": v})
            for (p, m), vs in VALUES.items() for s, v in enumerate(vs)]
    return records_frame(path, [*recs, *extra])


def test_difference_is_paired_by_seed_with_a_t_interval(tmp_path):
    comp = twins.comparison(_frame(tmp_path), "gen1").set_index("pooling")
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
    comp = twins.comparison(_frame(tmp_path, [only]), "gen1")
    assert set(comp["task"]) == {"sst2"}
    empty = twins.as_markdown(data.frame([]))
    assert "No twin records yet" in empty and "pretrain" in empty


def test_one_seed_has_no_interval(tmp_path):
    path = tmp_path / "one.jsonl"
    for m, v in ((NSP, 0.6), (NO, 0.5)):
        store.append_record(path, make_record(run_id=m, model=m, metrics={"accuracy": v}))
    df, _ = data.load([path])
    row = twins.comparison(df, "gen1").iloc[0]
    assert row["diff"] == pytest.approx(10.0) and math.isnan(row["diff_low"])
    assert "one seed: no interval" in twins.sentences(twins.comparison(df, "gen1"))[0]
    shown = twins.display(twins.comparison(df, "gen1")).iloc[0]  # one seed has no spread to print, not a spread of 0
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


# --- the registry of pairs, several pairs, the seed spread ---------------------------------------------------------


def test_the_registry_reads_scratch_pairs_from_pretrained_and_names_each_pair_once():
    assert MAIN in TWINS and list(TWINS)[-1] == "gen1"  # the main pair first, the first generation last
    scratch = {p.nsp for p in TWINS.values() if p.nsp in PRETRAINED}
    # every NSP model pre-trained here with a twin is in exactly one pair, and its control is that twin
    assert scratch == {n for n, m in PRETRAINED.items() if m.nsp and m.twin}
    for pair in TWINS.values():
        assert pair.nsp != pair.control and len(set(pair.models)) == 2
        if pair.nsp in PRETRAINED:
            nsp, control = PRETRAINED[pair.nsp], PRETRAINED[pair.control]
            assert nsp.nsp and not control.nsp and nsp.twin == pair.control and control.twin == pair.nsp
            assert pair.seed == nsp.seed == control.seed
            assert pair.models == (nsp.model_id, control.model_id)
        for ref in (pair.spread_against, pair.snapshot_of):
            assert not ref or ref in TWINS
    # the main pair at the seed-1 budget: snapshots of the main pair's run, published from its committed weights
    assert PRETRAINED["wiki-bert-mini-g2-50m"].snapshot_of == "wiki-bert-mini-g2" and TWINS["gen2-50m"].snapshot_of
    assert TWINS["gen2-50m"].models == ("berteval/wiki-bert-mini-g2-50m", "berteval/wiki-bert-mini-g2-nonsp-50m")
    # the strong encoder's pair: derived variants, under the embedded model's hub id as records name them
    minilm = TWINS["minilm-wiki"]
    assert VARIANTS["mlm-nsp-wiki"].trains_nsp and not VARIANTS["mlm-wiki"].trains_nsp
    assert minilm.models == ("sentence-transformers/all-MiniLM-L6-v2+mlm-nsp-wiki",
                             "sentence-transformers/all-MiniLM-L6-v2+mlm-wiki")
    assert record_id("default") == "sentence-transformers/all-MiniLM-L6-v2"
    # the seed comparison: seed 1 against the main pair's 50 M snapshot, judging the main pair
    assert [(o.name, r.name, m.name) for o, r, m in spread_pairs()] == [("gen2-seed1", "gen2-50m", "gen2")]
    assert TWINS["gen2-seed1"].seed == 1 and TWINS["gen2-50m"].seed == 0


def test_the_first_generation_is_labelled_once_with_its_punctuation_cue():
    gen1 = TWINS["gen1"]
    assert gen1.label.startswith("first generation") and "19.9 M tokens" in gen1.label
    assert "punctuation cue" in gen1.caveat and "mid-sentence" in gen1.caveat
    assert [p.name for p in TWINS.values() if p.caveat] == ["gen1"]  # the cue-free pairs carry no such caveat
    assert TWINS["gen2"].label.startswith("second generation, pre-training seed 0")
    assert TWINS["gen2-seed1"].label.startswith("second generation, pre-training seed 1")


def _pair_records(pair: str, cells: dict, base: float = 0.6):
    """Records of both models of `pair`: per (task, pooling), the NSP model `diff` points above its control, one
    list entry per seed."""
    nsp, control = TWINS[pair].models
    out = []
    for (task, pooling), diffs in cells.items():
        for s, d in enumerate(diffs):
            for model, v in ((nsp, base + d / 100), (control, base)):
                out.append(make_record(run_id=f"{model}-{task}-{pooling}-{s}", model=model, task=task,
                                       pooling=pooling, seed=s, metrics={"accuracy": v}))
    return out


def test_several_pairs_each_under_its_own_label_and_the_others_listed_without_records(tmp_path):
    recs = [*_pair_records("gen1", {("sst2", "pooler"): [3, 3, 3]}),
            *_pair_records("gen2", {("sst2", "pooler"): [-2, -2, -2]}),
            *_pair_records("minilm-wiki", {("sst2", "mean"): [1, 2, 3]})]
    df = records_frame(tmp_path / "r.jsonl", recs)
    v = twins.view(df)
    assert [p.name for p, _ in v.pairs] == ["gen2", "minilm-wiki", "gen1"]  # registry order, records only
    assert [p.name for p in v.without_records] == ["gen2-seed1", "gen2-50m"]
    assert twins.comparison(df, "gen2")["diff"].iloc[0] == pytest.approx(-2.0)  # each pair reads its own models
    assert twins.comparison(df, "gen1")["diff"].iloc[0] == pytest.approx(3.0)
    text = twins.as_markdown(df)
    for name in ("gen2", "minilm-wiki", "gen1"):
        assert f"#### {twins.heading(TWINS[name])}" in text
    assert text.count("punctuation cue") == 1  # said once, under the first generation
    gen1 = text.split(f"#### {twins.heading(TWINS['gen1'])}")[1]
    assert gen1.lstrip().startswith("First generation, pre-training seed 0, 19.9 M tokens.")
    assert "`default+mlm-nsp-wiki` (with NSP) vs `default+mlm-wiki` (without)" in text
    assert "No records yet: gen2-seed1" in text and "gen2-50m (`wiki-bert-mini-g2-50m`" in text
    assert text.count("Published, drawn apart") == 1  # the published pairs once, after every pair


def test_a_pair_without_records_renders_an_honest_line_not_an_error(tmp_path, capsys):
    df = records_frame(tmp_path / "r.jsonl", _pair_records("gen1", {("sst2", "cls"): [1, 1]}))
    text = twins.as_markdown(df, ["gen2-seed1", "gen2-50m"])
    assert "No records of this pair yet: `wiki-bert-mini-g2-seed1` and `wiki-bert-mini-g2-seed1-nonsp`" in text
    assert "No records of this pair yet: `wiki-bert-mini-g2-50m` and `wiki-bert-mini-g2-nonsp-50m`" in text
    assert "No cell both `gen2-50m` and `gen2-seed1` hold yet" in text  # the seed spread, honestly empty
    assert "wiki-bert-mini-nonsp`" not in text  # gen1 not asked for
    assert twins.comparison(df, "gen2").empty and twins.seed_spread(df, "gen2-seed1", "gen2-50m", "gen2").empty
    assert twins.main([str(tmp_path / "r.jsonl"), "--pair", "minilm-wiki"]) == 0
    assert "No records of this pair yet: `default+mlm-nsp-wiki`" in capsys.readouterr().out
    assert twins.main([str(tmp_path / "r.jsonl")]) == 0  # default: the pairs with records
    out = capsys.readouterr().out
    assert "#### gen1:" in out and "#### gen2:" not in out and "No records yet: gen2 (" in out


def test_the_seed_spread_rule():
    # interval excludes 0 and |diff| > spread: beyond; either condition failing: not; no interval: not judged
    assert twins.exceeds_spread(6.0, 4.0, 8.0, 1.0) is True
    assert twins.exceeds_spread(-6.0, -8.0, -4.0, 1.0) is True
    assert twins.exceeds_spread(4.0, 2.0, 6.0, 6.0) is False  # within the seed spread
    assert twins.exceeds_spread(4.0, -1.0, 9.0, 0.5) is False  # the interval includes 0
    assert twins.exceeds_spread(4.0, math.nan, math.nan, 0.5) is None  # one seed


def test_seed_spread_side_by_side_with_a_difference_beyond_it_and_one_within(tmp_path):
    recs = [
        # seed 0 at 50 M and seed 1 at 50 M: pooler +3 and +2 (spread 1); mean +4 and -2 (spread 6); cls both
        *_pair_records("gen2-50m", {("sst2", "pooler"): [3, 3, 3], ("sst2", "mean"): [4, 4, 4],
                                    ("sst2", "cls"): [1, 1, 1]}),
        *_pair_records("gen2-seed1", {("sst2", "pooler"): [2, 2, 2], ("sst2", "mean"): [-2, -2, -2],
                                      ("sst2", "cls"): [1, 1, 1], ("sst2", "max"): [5, 5, 5]}),
        # the main pair at its full budget: pooler +5..+7 (beyond a spread of 1), mean +3..+5 (within 6), no cls
        *_pair_records("gen2", {("sst2", "pooler"): [5, 6, 7], ("sst2", "mean"): [3, 4, 5]}),
    ]
    df = records_frame(tmp_path / "r.jsonl", recs)
    (other, ref, main), = spread_pairs()
    sp = twins.seed_spread(df, other, ref, main).set_index("pooling")
    assert list(sp.index) == ["cls", "pooler", "mean"]  # cells both seeds hold (not max), the question's order
    pooler, mean, cls = sp.loc["pooler"], sp.loc["mean"], sp.loc["cls"]
    assert (pooler["diff_ref"], pooler["diff_other"], pooler["spread"]) == pytest.approx((3.0, 2.0, 1.0))
    expect = summarise([5.0, 6.0, 7.0])
    assert (pooler["main_diff"], pooler["main_low"], pooler["main_high"]) == pytest.approx(
        (expect.mean, expect.ci95_low, expect.ci95_high))
    assert pooler["exceeds"] is True
    assert mean["spread"] == pytest.approx(6.0) and mean["main_diff"] == pytest.approx(4.0)
    assert mean["main_low"] > 0 and mean["exceeds"] is False  # its interval excludes 0, but 4 < 6
    assert cls["main_n"] == 0 and cls["exceeds"] is None  # the main pair has no record of it: not judged
    shown = twins.spread_display(twins.Spread(other, ref, main, twins.seed_spread(df, other, ref, main)))
    verdicts = dict(zip(shown["pooling"], shown["beyond the spread?"]))
    assert verdicts == {"cls": "not judged: the main pair has no record of this cell", "pooler": "yes",
                        "mean": "no: within the seed spread"}
    assert list(shown.columns[3:6]) == ["gen2-50m (seed 0)", "gen2-seed1 (seed 1)", "seed spread"]
    text = twins.as_markdown(df)
    assert "#### Seed spread: gen2-seed1 against gen2-50m, judging gen2" in text
    assert "| SST-2 | frozen probe | `pooler` | +3.0 | +2.0 | 1.0 | +6.0 [95% CI" in text


def test_report_shows_each_pair_with_records_and_labels_the_first_generation(tmp_path):
    from leaderboard import report

    path = tmp_path / "r.jsonl"
    recs = [*_pair_records("gen1", {("sst2", "pooler"): [3, 3]}), *_pair_records("gen2", {("sst2", "mean"): [1, 2]})]
    records_frame(path, recs)
    out, _, _ = report.write_report(tmp_path / "report.html", [path], "t")
    section = out.read_text().split('<details id="twins" class="section">')[1].split("</details>")[0]
    assert "<h3>gen2: <code>wiki-bert-mini-g2</code>" in section and "<h3>gen1: <code>wiki-bert-mini</code>" in section
    assert section.index("<h3>gen2:") < section.index("<h3>gen1:")
    assert section.count("punctuation cue") == 1 and "First generation, pre-training seed 0" in section
    assert "No records yet: gen2-seed1" in section and 'id="twins-0"' in section and 'id="twins-1"' in section
