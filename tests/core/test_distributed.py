"""Runs under a multi-process launch (`accelerate launch`, torchrun): every process runs the same
command, rank 0 alone writes, and a record names how many processes made it. The real two-process
run (gloo, a SIGKILL of either process, resume) is `tests/tools/accelerate_check.py`, run here
behind the slow marker."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from berteval import records, runs
from berteval.tasks import get

from conftest import REPO, SHARED_DATA

DATA = Path(os.environ.get("BERTEVAL_DATA") or SHARED_DATA)


def _probe(model, data, out):
    return runs.run(runs.RunSpec(task=get("sst2"), model=str(model), poolings=["cls"], seeds=[0], data_dir=data,
                                 out=out, progress=False))


def test_records_name_the_process_count_and_only_rank_0_writes(tiny_models, tiny_sst2, tmp_path, monkeypatch):
    alone = _probe(tiny_models["pretraining"], tiny_sst2, tmp_path / "alone").written[0]
    assert alone.config["processes"] == 1
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    rank1 = _probe(tiny_models["pretraining"], tiny_sst2, tmp_path / "two")
    assert rank1.written == [] and rank1.skipped == [] and not (tmp_path / "two" / "sst2.jsonl").exists()
    monkeypatch.setenv("RANK", "0")
    rank0 = _probe(tiny_models["pretraining"], tiny_sst2, tmp_path / "two").written[0]
    assert rank0.config["processes"] == 2
    # A frozen probe's vectors are encoded a share per process and gathered in order (berteval.features): the
    # cell is the one-process cell, its run id too (a fine-tune, N batches a step, is another cell).
    assert rank0.run_id == alone.run_id
    got, problems = records.read_records([tmp_path / "two" / "sst2.jsonl"])  # noqa: F841 (read below)
    assert problems == [] and [r.run_id for r in got] == [rank0.run_id]


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "sst2" / "train.tsv").is_file(), reason="no ../shared/data or BERTEVAL_DATA here")
def test_fine_tune_under_accelerate_launch_with_two_processes_survives_a_kill_of_either():
    sys.path.insert(0, str(REPO / "tests" / "tools"))
    import accelerate_check

    # The data where CI puts it ($BERTEVAL_DATA), not only beside the clone: the tool once looked there alone,
    # and every process of the launch stopped on the missing folder (exit 1 after 7 s).
    # 2,800 sentences: 79 steps an epoch at 2 x 16, so the first epoch's end writes a checkpoint (the fine-tune
    # checkpoints every 200 steps, and at an epoch's end once 50 steps are unsaved: berteval.training). With
    # 1,500 (43 steps an epoch) no checkpoint was ever written, and the kill had nothing to resume from.
    assert accelerate_check.main(["--train", "2800", "--data-dir", str(DATA)]) == 0
