"""The real data in ../shared/data (or $BERTEVAL_DATA), where it is present."""

import os
from pathlib import Path

import pytest

from berteval import records, runs
from berteval.tasks import get
from conftest import REPO, SHARED_DATA

DATA = Path(os.environ.get("BERTEVAL_DATA") or SHARED_DATA)
needs_data = pytest.mark.skipif(not (DATA / "sst2" / "dev.tsv").is_file(), reason="no ../shared/data here")


@needs_data
def test_sst2_real_counts_and_labels():
    data = get("sst2").load(DATA)
    assert len(data.train) == 67_349 and len(data.eval) == 872
    assert sum(data.train.labels) == 37_569 and sum(data.eval.labels) == 444
    assert data.eval.texts[0] == "it 's a charming and often affecting journey . "


@needs_data
def test_committed_records_match_the_data_here():
    recs, problems = records.read_records([REPO / "leaderboard" / "results" / "sst2.jsonl"])
    assert problems == [] and recs
    sha = get("sst2").load(DATA).data_sha256
    full = [r for r in recs if r.config.get("train_examples_available") == 67_349]
    assert full and {r.data_sha256 for r in full} == {sha}  # records on the full data name this data
    subset = [r for r in recs if r not in full]
    assert all(r.data_sha256 != sha and r.config.get("train_examples_available", 0) < 67_349 for r in subset)


@pytest.mark.slow
@needs_data
def test_default_model_probe_on_real_data(tmp_path):
    spec = runs.RunSpec(task=get("sst2"), poolings=["mean"], seeds=[0], data_dir=DATA, out=tmp_path,
                          limit_train=3000, progress=False)
    rec = runs.run(spec).written[0]
    assert rec.metrics["accuracy"] > 0.7  # a real sentence encoder on real sentiment, far above 0.5
