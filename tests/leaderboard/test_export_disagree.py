"""`python -m berteval export model-index` and `python -m berteval disagree`: both read the committed records
(and, for disagree, their per-example predictions) without torch, and both are checked against something
outside themselves: huggingface_hub's own model-card parser, and the McNemar counts in the records."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from huggingface_hub import ModelCard
from huggingface_hub.repocard_data import model_index_to_eval_results

from berteval import disagree, export, record_lookup
from berteval.errors import BertevalError
from berteval.store import Store
from conftest import REPO, SHARED_DATA, docs_text

STORE = Store()


def _cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "berteval", *args], cwd=REPO, capture_output=True, text=True, **kw)


# --- export ---------------------------------------------------------------------------------------------

def test_export_card_writes_a_twins_model_index_into_its_card_and_refuses_other_models(tmp_path):
    import shutil

    from berteval.models.pretrained import folder

    src = folder("wiki-bert-mini")
    if not any(r.model == "berteval/wiki-bert-mini" for r in STORE.read("nsp")[0]):
        pytest.skip("no wiki-bert-mini records committed yet")
    root = tmp_path / "results"
    (root / "encoders").mkdir(parents=True)
    for f in STORE.root.glob("*.jsonl"):
        shutil.copy(f, root / f.name)
    shutil.copytree(src, root / "encoders" / "wiki-bert-mini")
    proc = _cli("export", "model-index", "--model", "wiki-bert-mini", "--card", "--results", str(root))
    assert proc.returncode == 0, proc.stderr
    card = ModelCard((root / "encoders" / "wiki-bert-mini" / "README.md").read_text())
    assert card.data.eval_results and card.data.model_name == "berteval/wiki-bert-mini"
    assert "Stopped early" in card.text or "stopped_early" not in (src / "derivation.json").read_text()
    proc = _cli("export", "model-index", "--model", "default", "--card", "--results", str(root))
    assert proc.returncode == 2 and "--card writes the model card of a model berteval pre-trained" in proc.stderr


def test_model_index_of_the_default_model_round_trips_through_huggingface_hub(tmp_path):
    out = tmp_path / "model-index.yaml"
    proc = _cli("export", "model-index", "--model", "default", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    name, results = model_index_to_eval_results(yaml.safe_load(text)["model-index"])
    assert name == "sentence-transformers/all-MiniLM-L6-v2"
    # The same block inside a model card's front matter, read by huggingface_hub's ModelCard.
    card = ModelCard(f"---\n{text}---\n# card\n")
    assert len(card.data.eval_results) == len(results)
    # One result per task, regime and pooling with records (SQuAD's reports EM beside F1).
    from berteval.tasks import TASKS

    recs = [r for task in TASKS for r in STORE.read(task)[0] if r.model == name]
    cells = {(r.task, r.regime, r.pooling) for r in recs}
    seen = {(r.metric_config, r.dataset_type, r.task_type) for r in results}
    configs = {c for c, _, _ in seen}
    assert len({(r.dataset_name, r.metric_config) for r in results}) == len(cells)
    for task, regime, pooling in cells:
        assert any(f"pooling={pooling},regime={regime}," in c for c in configs), (task, regime, pooling)
    sst2_mean = [r for r in results if r.dataset_type == "nyu-mll/glue" and "SST-2" in r.dataset_name and r.metric_config.startswith("pooling=mean,regime=probe")]
    assert len(sst2_mean) == 1
    m = sst2_mean[0]
    full = max(r.n_train for r in recs if (r.task, r.regime, r.pooling, r.layer) == ("sst2", "probe", "mean", -1))
    seeds = [r.metrics["accuracy"] for r in recs
             if (r.task, r.regime, r.pooling, r.layer, r.n_train) == ("sst2", "probe", "mean", -1, full)]
    assert len(seeds) >= 3  # the value is the mean over every seed of the full-data setup
    assert m.metric_type == "accuracy" and m.metric_value == pytest.approx(sum(seeds) / len(seeds), abs=1e-4)
    assert m.dataset_split == "validation" and m.dataset_revision.startswith("sha256:") and m.source_name == "berteval"
    assert len(m.metric_args["record_ids"]) == len(seeds) and m.metric_args["command"].startswith("python -m berteval run")
    squad = [r for r in results if r.task_type == "question-answering" and "regime=finetune" in r.metric_config]
    assert {r.metric_type for r in squad} == {"f1", "exact_match"}


def test_model_index_names_derived_models_and_refuses_unknown_ones():
    recs = STORE.read("sst2")[0]
    ids = {r.model for r in recs}
    derived = sorted(m for m in ids if "+" in m)
    if derived:
        variant = derived[0].split("+", 1)[1]
        assert export.model_index(f"default+{variant}", recs)[0]["name"] == derived[0]
    with pytest.raises(BertevalError, match="no records of model"):
        export.model_index("nobody/nothing", recs)


# --- disagree -------------------------------------------------------------------------------------------

def _probe_pairs():
    """Every (a, b) pair of committed SST-2 probe records of one model, setup and seed that a paired test covers."""
    recs = [r for r in STORE.read("sst2")[0] if r.regime == "probe"]
    by_id = {r.run_id: r for r in recs}
    for r in recs:
        for t in r.paired_tests:
            other = by_id.get(t["other"]["run_id"])
            if other is not None:
                yield r, other, t


def test_disagree_counts_equal_the_records_mcnemar_counts_for_every_committed_sst2_probe_pair():
    pairs = list(_probe_pairs())
    assert len(pairs) >= 30
    for a, b, test in pairs:
        d = disagree.compare("sst2", a, b)
        assert (len(d.a_only), len(d.b_only)) == (test["n_only_self_correct"], test["n_only_other_correct"]), a.run_id
        assert d.mcnemar_counts() == (len(d.a_only), len(d.b_only))


def test_disagree_command_prints_the_counts_line_then_one_line_per_example():
    proc = _cli("disagree", "--task", "sst2", "--model", "default", "--a", "mean", "--b", "cls", "--seed", "0",
                "--results", str(STORE.root), env={**os.environ, "BERTEVAL_DATA": ""})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    # The counts the record's McNemar test holds (docs/leaderboard.md quotes them: `python -m berteval disagree`).
    recs = STORE.read("sst2")[0]
    mean = disagree.find(recs, "default", "mean", -1, 0, "probe")
    test = next(t for t in mean.paired_tests if t["other"]["pooling"] == "cls" and t["other"]["layer"] == -1)
    won, lost = test["n_only_self_correct"], test["n_only_other_correct"]
    assert lines[0] == f"{won + lost} disagreements: mean right cls wrong {won}, cls right mean wrong {lost}"
    assert f"# {lines[0]}" in docs_text()
    assert len(lines) == 1 + won + lost
    assert all("\tgold " in line and "\tmean: " in line and "\tcls: " in line for line in lines[1:])
    assert "--data-dir" in proc.stderr  # without data, it says how to see the texts
    bad = _cli("disagree", "--task", "sst2", "--a", "mean", "--b", "nonsense", "--seed", "0")
    assert bad.returncode == 2 and "no probe record of nonsense" in bad.stderr


@pytest.mark.skipif(not (SHARED_DATA / "sst2" / "dev.tsv").is_file(), reason=f"no SST-2 dev set under {SHARED_DATA}")
def test_disagree_shows_each_sentence_with_a_data_dir():
    recs = STORE.read("sst2")[0]
    a = disagree.find(recs, "default", "mean", -1, 0, "probe")
    b = disagree.find(recs, "default", "cls", -1, 0, "probe")
    d = disagree.compare("sst2", a, b, data_dir=SHARED_DATA)
    assert d.note == "" and all(e.text and e.id.startswith("validation-") for e in d.examples())
    first = d.lines(limit=1)
    assert len(first) == 3 and first[1].count("\t") == 5


@pytest.mark.skipif(not (SHARED_DATA / "squad" / "dev-v1.1.json").is_file(),
                    reason=f"no SQuAD dev set under {SHARED_DATA}")
def test_disagree_on_squad_compares_exact_matches_of_two_regimes():
    recs = STORE.read("squad")[0]
    a = disagree.find(recs, "default", "span", -1, 0, "finetune")
    b = disagree.find(recs, "default", "span", -1, 0, "probe")
    d = disagree.compare("squad", a, b, data_dir=SHARED_DATA)
    # EM per question: the difference of the two records' exact-match counts over the 10,570 questions.
    em = lambda r: round(r.metrics["exact_match"] / 100 * r.n_eval)  # noqa: E731
    assert len(d.a_only) - len(d.b_only) == em(a) - em(b)
    assert d.name_a == "span (finetune)" and "?" in d.examples(1)[0].text


def test_model_names_resolve_from_the_records():
    recs = STORE.read("sst2")[0]
    assert record_lookup.model_id("default", recs) == "sentence-transformers/all-MiniLM-L6-v2"
    assert record_lookup.model_id("sentence-transformers/all-MiniLM-L6-v2", recs) == "sentence-transformers/all-MiniLM-L6-v2"
    assert record_lookup.command(recs[0]).startswith("python -m berteval run --task sst2")


def test_disagree_compares_two_models_on_the_same_examples_with_its_own_mcnemar_test():
    """--model-b: one pre-trained twin against the other (the records only test heads of one model)."""
    from berteval.stats import mcnemar_exact

    proc = _cli("disagree", "--task", "mrpc", "--model", "wiki-bert-mini", "--model-b", "wiki-bert-mini-nonsp",
                "--a", "cls", "--b", "cls", "--regime", "finetune", "--seed", "0", "--results", str(STORE.root),
                env={**os.environ, "BERTEVAL_DATA": ""})
    assert proc.returncode == 0, proc.stderr
    recs = STORE.read("mrpc")[0]
    a, b = (disagree.find(recs, m, "cls", -1, 0, "finetune") for m in ("wiki-bert-mini", "wiki-bert-mini-nonsp"))
    assert a.model != b.model
    right = []
    for rec in (a, b):
        p = json.loads(STORE.inside(rec.predictions_file).read_text())
        right.append([x == y for x, y in zip(p["pred"], p["label"])])
    won = sum(x and not y for x, y in zip(*right))
    lost = sum(y and not x for x, y in zip(*right))
    lines = proc.stdout.splitlines()
    assert lines[0] == (f"{won + lost} disagreements: cls (wiki-bert-mini) right cls (wiki-bert-mini-nonsp) wrong "
                        f"{won}, cls (wiki-bert-mini-nonsp) right cls (wiki-bert-mini) wrong {lost}")
    assert len(lines) == 1 + won + lost
    p = mcnemar_exact(*right)["p_value"]
    assert f"exact McNemar test (two-sided) on these counts: p = {p:.3g}" in proc.stderr
    other_task = _cli("disagree", "--task", "rte", "--model", "wiki-bert-mini", "--model-b", "nobody", "--a", "cls",
                      "--b", "cls", "--regime", "finetune", "--results", str(STORE.root))
    assert other_task.returncode == 2 and "nobody" in other_task.stderr
