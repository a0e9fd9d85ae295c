"""`--dtype auto`: bf16 where the hardware computes it natively (AVX512-BF16, AMX, Arm BF16; a CUDA GPU of
compute capability 8+), fp32 elsewhere, resolved once at a command's start so that records, run ids and
derivation.json name what ran. An explicit `--dtype bf16` stays bf16 on any CPU (its run ids, and so the
committed cells the docs' commands name, do not depend on the machine), with a note where bf16 is emulated.
The CPU's flags are mocked: these tests pass the same on any machine."""

from __future__ import annotations

import json
import types

import pytest
import torch

from berteval import devices, precision
from berteval.cli import main
from berteval.errors import BertevalError

# /proc/cpuinfo excerpts: an AVX2-only EPYC (no bf16 in hardware), a Zen 4 EPYC with AVX512-BF16, a Sapphire
# Rapids Xeon with AMX, an Arm Neoverse V1 with BF16
AVX2 = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\nflags\t\t: fpu sse2 avx avx2 fma\n"
ZEN4 = "flags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n"
AMX = "flags\t\t: fpu avx2 avx512f amx_bf16 amx_tile amx_int8\n"
NEOVERSE = "Features\t: fp asimd sve bf16 i8mm\n"


@pytest.fixture
def cpuinfo(tmp_path, monkeypatch):
    """Point the resolver at a /proc/cpuinfo of our choosing (None: a machine without one, e.g. macOS)."""
    def use(text: str | None):
        path = tmp_path / "cpuinfo"
        if text is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(text)
        monkeypatch.setattr(precision, "CPUINFO", str(path))
    monkeypatch.setattr(devices, "current", lambda: torch.device("cpu"))
    return use


@pytest.mark.parametrize("text, native", [(AVX2, False), (ZEN4, True), (AMX, True), (NEOVERSE, True), (None, False),
                                          ("flags\t: avx512f avx512bw\n", False)])
def test_auto_is_bf16_only_where_the_cpu_computes_it_natively(cpuinfo, text, native):
    cpuinfo(text)
    assert precision.cpu_native_bf16() is native
    assert precision.resolve("auto") == ("bf16" if native else "fp32")
    assert precision.resolve("fp32") == "fp32" and precision.resolve("bf16") == "bf16"  # explicit: as asked
    assert (precision.emulated_bf16_note("bf16") is None) is native
    assert precision.emulated_bf16_note("fp32") is None


def test_auto_on_a_gpu_follows_its_bf16(cpuinfo, monkeypatch):
    cpuinfo(AVX2)  # the host CPU does not matter for a GPU run
    monkeypatch.setattr(torch.version, "hip", None)
    for major, want in ((8, "bf16"), (7, "fp32")):
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d=None, m=major: types.SimpleNamespace(major=m))
        assert precision.resolve("auto", torch.device("cuda:0")) == want
    assert precision.emulated_bf16_note("bf16", torch.device("cuda:0")) is None


def test_an_unknown_dtype_is_refused_and_auto_never_reaches_a_run():
    with pytest.raises(BertevalError, match="unknown dtype 'fp16'"):
        precision.resolve("fp16")
    with pytest.raises(BertevalError, match="resolved before anything runs"):
        precision.identity("auto")


def _plan_ids(capsys, model, data, out, dtype) -> tuple[int, list[str], str]:
    code = main(["run", "--task", "sst2", "--model", model, "--pooling", "cls", "--seeds", "0", "--data-dir", data,
                 "--out", out, "--dtype", dtype, "--plan", "--no-progress"])
    stdout, stderr = capsys.readouterr()
    return code, [line.split()[-5] for line in stdout.splitlines() if line.startswith(("present", "to run"))], stderr


def test_explicit_bf16_cells_are_the_same_on_every_cpu_and_auto_names_what_it_resolved_to(
        capsys, cpuinfo, tiny_models, tiny_sst2, tmp_path):
    model, data, out = str(tiny_models["pretraining"]), str(tiny_sst2), str(tmp_path)
    ids = {}
    for name, text in (("avx2", AVX2), ("amx", AMX)):
        cpuinfo(text)
        for dtype in ("fp32", "bf16", "auto"):
            code, planned, err = _plan_ids(capsys, model, data, out, dtype)
            assert code == 1 and len(planned) == 1, err
            ids[name, dtype] = planned[0]
            if dtype == "auto":
                assert f"--dtype auto runs {'fp32' if name == 'avx2' else 'bf16'} here" in err
    # --dtype bf16 names the same cells on a CPU that emulates bf16 as on one that has it: a docs command
    # finds its committed cells anywhere; auto is whichever dtype the machine resolves it to
    assert ids["avx2", "bf16"] == ids["amx", "bf16"] != ids["avx2", "fp32"] == ids["amx", "fp32"]
    assert ids["avx2", "auto"] == ids["avx2", "fp32"] and ids["amx", "auto"] == ids["amx", "bf16"]


def test_a_run_records_the_resolved_dtype_and_warns_where_bf16_is_emulated(capsys, cpuinfo, tiny_models, tiny_sst2,
                                                                           tmp_path):
    base = ["run", "--task", "sst2", "--model", str(tiny_models["pretraining"]), "--pooling", "cls", "--seeds", "0",
            "--data-dir", str(tiny_sst2), "--out", str(tmp_path), "--no-progress"]
    cpuinfo(AVX2)
    assert main([*base, "--dtype", "auto"]) == 0
    assert "--dtype auto runs fp32 here" in capsys.readouterr().err
    assert main([*base, "--dtype", "bf16"]) == 0
    assert "bf16 is emulated here" in capsys.readouterr().err
    recs = [json.loads(line) for line in (tmp_path / "sst2.jsonl").read_text().splitlines()]
    assert [r["dtype"] for r in recs] == ["fp32", "bf16"]
