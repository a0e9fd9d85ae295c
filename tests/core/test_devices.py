"""The device option (`--device auto|cpu|cuda|cuda:N|mps`, BERTEVAL_DEVICE): resolved once, refused with what is
here when absent, recorded; named in the run id only where a result depends on it; and data-parallel encoding
under a two-process launch (gloo on this CPU) equal to one process."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from berteval import devices, runs
from berteval.errors import BertevalError
from berteval.tasks import get

from conftest import REPO


def test_the_option_resolves_to_what_is_here(monkeypatch):
    monkeypatch.delenv(devices.ENV, raising=False)
    assert devices.resolve(None).type == devices.resolve("auto").type == "cpu"  # no GPU on this machine
    assert devices.resolve("cpu").type == "cpu"
    with pytest.raises(BertevalError, match="this machine has: cpu"):
        devices.resolve("cuda:3")
    with pytest.raises(BertevalError, match="not one of"):
        devices.resolve("tpu")
    monkeypatch.setenv(devices.ENV, "cuda")
    with pytest.raises(BertevalError, match="not available here"):
        devices.resolve(None)


def test_records_name_the_device_and_ids_name_it_only_where_results_depend_on_it(tiny_models, tiny_sst2, tmp_path,
                                                                                  monkeypatch):
    from berteval.regimes import base

    spec = runs.RunSpec(task=get("sst2"), model=str(tiny_models["pretraining"]), poolings=["cls"], seeds=[0],
                        data_dir=tiny_sst2, out=tmp_path, progress=False)
    rec = runs.run(spec).written[0]
    assert rec.device.startswith("cpu:")
    run = base.Run(spec)
    from berteval import regimes

    probe = regimes.get("probe", spec.task)
    cell = probe.cells(run)[0]
    cpu_id = probe.identity(run, cell)
    monkeypatch.setattr(base, "_device_type", lambda: "cuda")
    assert probe.identity(run, cell) == cpu_id  # fp32 frozen: the same cell on any device
    spec.dtype = "bf16"
    assert probe.identity(base.Run(spec), cell)["device"] == "cuda"


def test_cli_refuses_an_absent_device_before_any_work(tiny_models, tiny_sst2, tmp_path, capsys):
    from berteval import cli

    assert cli.main(["run", "--task", "sst2", "--model", str(tiny_models["pretraining"]), "--data-dir",
                     str(tiny_sst2), "--out", str(tmp_path), "--device", "cuda", "--no-progress"]) == 2
    assert "not available here" in capsys.readouterr().err and not (tmp_path / "sst2.jsonl").exists()


SCRIPT = """
import sys, numpy as np
from berteval import features, models
m = models.load(sys.argv[1])
texts = [f"the movie was {w} and the plot {v}" for w in ("good", "bad", "fine", "dull", "fun") for v in
         ("was", "is", "seemed")] + ["a"]
res = features.encode(m, texts, data_sha256="dp", poolings=["cls", "mean"], layers=[-1, 1], progress=False,
                      use_cache=False, max_tokens=40)
import os
if os.environ.get("RANK", "0") == "0":
    np.savez(sys.argv[2], **{f"{p}@{l}": v for (p, l), v in res.vectors.items()})
"""


def test_two_process_encoding_equals_one_process(tiny_models, tmp_path):
    script = tmp_path / "encode.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    one = subprocess.run([sys.executable, str(script), str(tiny_models["pretraining"]), str(tmp_path / "one.npz")],
                         env=env, capture_output=True, text=True, timeout=300)
    assert one.returncode == 0, one.stderr[-2000:]
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                          "29517", str(script), str(tiny_models["pretraining"]), str(tmp_path / "two.npz")],
                         env=env, capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stderr[-2000:]
    a, b = np.load(tmp_path / "one.npz"), np.load(tmp_path / "two.npz")
    assert sorted(a.files) == sorted(b.files)
    for k in a.files:
        assert a[k].shape == b[k].shape
        np.testing.assert_allclose(a[k], b[k], atol=1e-5, err_msg=k)
