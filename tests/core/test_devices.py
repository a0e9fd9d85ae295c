"""The device option (`--device auto|cpu|cuda|cuda:N|mps`, BERTEVAL_DEVICE): resolved once, refused with what is
here when absent, recorded; named in the run id only where a result depends on it; and data-parallel encoding
under a two-process launch (gloo on this CPU) equal to one process. Precision per device (bf16 where the device
has it, else fp16 autocast with a gradient scaler for training and fp32 for frozen inference) and the back-off on
a GPU out-of-memory error, checked on this CPU with a mocked GPU (its capability; a forward that runs out)."""

from __future__ import annotations

import os
import subprocess
import sys
import types
import warnings

import numpy as np
import pytest
import torch

from berteval import devices, precision, runs, training
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
# Leave the process group before exiting: without it a process sometimes aborted at exit ("terminate called
# without an active exception", gloo's threads still running; about 1 run in 5 here, before and after the
# out-of-memory back-off), and torchrun reported the launch as failed after the vectors were written.
import torch.distributed as dist
if dist.is_initialized():
    dist.barrier()
    dist.destroy_process_group()
"""


# slow: two processes that each import torch and join over gloo (about 17 CPU s)
@pytest.mark.slow
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


# --- precision per device: bf16 where the device has it, else fp16 autocast (trained) or fp32 (frozen) -------


@pytest.fixture
def fake_gpu(monkeypatch):
    """The process on a CUDA GPU of compute capability `major` (set it: `fake_gpu(7)`), as far as the precision
    choice can tell: devices.current() says cuda:0 and torch reports the capability. No tensor goes there."""
    def make(major: int):
        monkeypatch.setattr(devices, "current", lambda: torch.device("cuda:0"))
        monkeypatch.setattr(torch.version, "hip", None)
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d=None: types.SimpleNamespace(major=major))
        # torch's own check says yes on a T4/V100 (bf16 emulated): berteval must not ask it
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    return make


def test_precision_on_the_cpu_is_what_was_asked():
    cpu = torch.device("cpu")
    for dtype in ("fp32", "bf16"):
        for trained in (False, True):
            assert devices.compute_dtype(dtype, trained, cpu) == dtype
    assert devices.bf16_supported(cpu)
    assert training.mixed_precision("bf16") == "bf16" and training.mixed_precision("fp32") == "no"
    assert precision.fallback("bf16", precision.FROZEN) == precision.fallback("bf16", precision.MIXED) == {}
    assert precision.describe("bf16", precision.FROZEN) == "bf16 (weights)"
    assert precision.describe("bf16", precision.MIXED) == "bf16 (autocast)"
    assert precision.describe("fp32") == "fp32"
    with devices.autocast("bf16") as _:
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16 and torch.is_autocast_enabled("cpu")


def test_a_gpu_with_bf16_runs_bf16(fake_gpu):
    fake_gpu(8)
    assert devices.bf16_supported(torch.device("cuda:0"))
    assert precision.effective("bf16", precision.FROZEN) == precision.effective("bf16", precision.MIXED) == "bf16"
    assert training.mixed_precision("bf16") == "bf16" and precision.fallback("bf16", precision.MIXED) == {}


def test_a_gpu_without_bf16_trains_in_fp16_with_a_scaler_and_infers_in_fp32(fake_gpu, monkeypatch):
    fake_gpu(7)  # a T4 or V100: torch.cuda.is_bf16_supported() says yes (emulated), berteval says no
    assert not devices.bf16_supported(torch.device("cuda:0"))
    assert precision.effective("bf16", precision.MIXED) == "fp16"
    assert precision.effective("bf16", precision.FROZEN) == "fp32"
    assert precision.effective("fp32", precision.MIXED) == "fp32"  # fp32 stays fp32 everywhere
    assert training.mixed_precision("bf16") == "fp16" and training.mixed_precision("fp32") == "no"
    assert precision.fallback("bf16", precision.MIXED) == {"precision": "fp16"}
    assert precision.fallback("bf16", precision.FROZEN) == {"precision": "fp32"}
    assert precision.describe("bf16", precision.MIXED).startswith("fp16 (autocast, gradient scaler)")
    assert "has none" in precision.describe("bf16", precision.FROZEN)
    with warnings.catch_warnings():  # "CUDA is not available": this machine has none; the choice is what counts
        warnings.simplefilter("ignore")
        ctx = devices.autocast("bf16")  # the evaluation right after training: fp16 autocast, as it trained
    assert ctx.device == "cuda" and ctx.fast_dtype == torch.float16
    module = torch.nn.Linear(2, 2)
    with precision.running(module, "bf16", precision.FROZEN) as m:
        assert m is module  # frozen: the fp32 module itself, no bf16 copy
    # training.train asks accelerate for fp16 (accelerate adds the GradScaler) on the GPU
    import accelerate

    seen = {}

    class Stop(Exception):
        pass

    def fake_accelerator(**kw):
        seen.update(kw)
        raise Stop

    monkeypatch.setattr(accelerate, "Accelerator", fake_accelerator)
    with pytest.raises(Stop):
        training.train(module, list(range(4)), lambda b: b, lambda m, b: 0, training.TrainConfig(dtype="bf16"),
                       progress=False)
    assert seen["mixed_precision"] == "fp16" and seen["cpu"] is False


def test_run_ids_name_a_precision_fallback_off_the_cpu_only(tiny_models, tiny_sst2, tmp_path, fake_gpu):
    from berteval import regimes
    from berteval.regimes import base

    def ident(regime: str, dtype: str) -> dict:
        spec = runs.RunSpec(task=get("sst2"), model=str(tiny_models["pretraining"]), poolings=["cls"], seeds=[0],
                            data_dir=tiny_sst2, out=tmp_path, progress=False, regime=regime, dtype=dtype)
        run = base.Run(spec)
        impl = regimes.get(regime, spec.task)
        return impl.identity(run, impl.cells(run)[0])

    cpu = {(r, d): ident(r, d) for r in ("probe", "finetune") for d in ("fp32", "bf16")}
    assert all("precision" not in i and "device" not in i for i in cpu.values())  # CPU ids as they always were
    fake_gpu(7)
    assert ident("probe", "fp32") == cpu[("probe", "fp32")]  # fp32 frozen: the same cell anywhere
    assert ident("probe", "bf16")["precision"] == "fp32"
    assert ident("finetune", "bf16")["precision"] == "fp16"
    assert "precision" not in ident("finetune", "fp32")
    fake_gpu(8)
    assert "precision" not in ident("probe", "bf16") and ident("probe", "bf16")["device"] == "cuda"


def test_records_off_the_cpu_say_what_precision_ran(tiny_models, tiny_sst2, tmp_path, monkeypatch):
    spec = lambda out: runs.RunSpec(task=get("sst2"), model=str(tiny_models["pretraining"]),  # noqa: E731
                                    poolings=["cls"], seeds=[0], data_dir=tiny_sst2, out=out, progress=False)
    on_cpu = runs.run(spec(tmp_path / "cpu")).written[0]
    assert "precision" not in on_cpu.config and on_cpu.device.startswith("cpu:")
    # Only the record's view of the device moves (the tensors stay here): the record names it and the precision.
    gpu = types.SimpleNamespace(type="cuda")
    monkeypatch.setattr(runs, "devices", types.SimpleNamespace(current=lambda: gpu, describe=lambda d: "cuda: Fake"))
    rec = runs.run(spec(tmp_path / "gpu")).written[0]
    assert rec.device == "cuda: Fake" and rec.config["precision"] == "fp32"


def test_derivation_records_name_the_device_they_ran_on(monkeypatch, fake_gpu):
    from berteval.derive import artifacts

    ctx = types.SimpleNamespace(spec=types.SimpleNamespace(name="default+x", base="default", variant=types.SimpleNamespace(
        suffix="x", summary="s")), command="c", seed=0, dtype="bf16", hyper={})
    base_model = types.SimpleNamespace(model_id="m", revision="r")
    outcome = types.SimpleNamespace(record={})
    rec = artifacts.record(ctx, "objective", base_model, outcome, {})
    assert rec["device"].startswith("cpu:") and "precision" not in rec
    fake_gpu(7)
    monkeypatch.setattr(devices, "describe", lambda d: f"cuda: Fake ({d})")
    rec = artifacts.record(ctx, "objective", base_model, outcome, {})
    assert rec["device"] == "cuda: Fake (cuda:0)"  # was provenance.device(): "cpu: ..." wherever it ran
    assert rec["precision"].startswith("fp16 (autocast, gradient scaler)")


# --- out of GPU memory: the batch again at half the token budget, the same results -----------------------

@pytest.fixture
def oom_above():
    """`oom_above(module, tokens)`: the module's forward raises a GPU out-of-memory error for a batch of more than
    `tokens` padded tokens (as a GPU would) and runs as usual otherwise; returns the padded sizes it was called
    with. The instance attribute is removed afterwards: `models.load` is cached, the next test gets the module
    as it was (not a leftover bound method, which a deepcopy of the module would follow)."""
    patched = []

    def make(module, tokens: int) -> list[int]:
        real = type(module).forward.__get__(module)
        calls: list[int] = []

        def forward(*args, **kw):
            calls.append(int(kw["input_ids"].numel()))
            if calls[-1] > tokens:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (mocked)")
            return real(*args, **kw)

        module.forward = forward
        patched.append(module)
        return calls

    yield make
    for module in patched:
        vars(module).pop("forward", None)


TEXTS = [" ".join(["the movie was good and the plot"] * (1 + i % 4) + ["fun"] * (i % 3)) for i in range(24)]


def test_oom_retry_halves_until_it_fits_and_keeps_what_worked():
    def step(budget):
        if budget > 1000:
            raise torch.OutOfMemoryError("mocked")
        return budget * 2

    assert devices.oom_retry(step, 4096) == (1024, 512)  # 4096, 2048 and 1024 did not fit
    with pytest.raises(torch.OutOfMemoryError):
        devices.oom_retry(step, 4096, floor=2048)  # a batch of one input that does not fit: raised, not looped
    with pytest.raises(ValueError):  # any other error passes straight through
        devices.oom_retry(lambda b: int("x"), 4096)


def test_batched_plans_the_same_batches_as_before_without_an_oom():
    from berteval import features

    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 60, size=200)
    for budget, cap in ((4096, 256), (300, 256), (4096, 7), (50, None)):
        seen = []
        devices.batched(lengths, budget, lambda idx: seen.append(list(idx)), cap)
        assert seen == [list(b) for b in features._batches(lengths, budget, cap or 10**9)]


def test_features_encode_backs_off_on_oom_and_equals_an_unforced_run(tiny_models, oom_above, caplog):
    from berteval import features, models

    m = models.load(str(tiny_models["pretraining"]))
    kw = dict(data_sha256="oom", poolings=["cls", "mean"], layers=[-1, 1], progress=False, use_cache=False)
    plain = features.encode(m, TEXTS, **kw).vectors
    calls = oom_above(m.encoder, 60)
    with caplog.at_level("WARNING", logger="berteval.devices"):
        forced = features.encode(m, TEXTS, **kw).vectors
    assert max(calls) > 60 and "out of memory" in caplog.text  # it did run out, and said so
    assert sum(n for n in calls if n <= 60) > 0
    for k in plain:
        np.testing.assert_allclose(forced[k], plain[k], atol=1e-5, err_msg=str(k))
    oom_above(m.encoder, 3)  # not even one input fits: the error, not an endless loop
    with pytest.raises(torch.OutOfMemoryError):
        features.encode(m, TEXTS, **kw)


def test_qa_windows_back_off_on_oom_and_equal_an_unforced_run(tiny_models, oom_above):
    from berteval import models
    from berteval.qa import inference
    from berteval.qa.windows import make_windows

    m = models.load(str(tiny_models["pretraining"]))
    qa = inference.head_model(m)
    contexts = [" ".join(["the film was very dull and the acting was poor ."] * (1 + i % 5)) for i in range(8)]
    windows = make_windows(m.tokenizer, ["was the plot good"] * 8, contexts, max_length=64, doc_stride=16)
    starts, ends = inference.window_logits(qa, m.tokenizer, windows)
    calls = oom_above(qa, 200)
    s2, e2 = inference.window_logits(qa, m.tokenizer, windows)
    assert max(calls) > 200
    for a, b in zip(starts + ends, s2 + e2):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_token_probe_states_back_off_on_oom_and_equal_an_unforced_run(tiny_models, oom_above):
    from berteval import models
    from berteval.heads import tokens

    m = models.load(str(tiny_models["pretraining"]))
    plain = tokens.token_states(m, TEXTS, [-1, 1], 64, "fp32", "attention")
    calls = oom_above(m.encoder, 60)
    forced = tokens.token_states(m, TEXTS, [-1, 1], 64, "fp32", "attention")
    assert max(calls) > 60
    for layer in plain:
        for a, b in zip(plain[layer], forced[layer]):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_nsp_head_backs_off_on_oom_and_equals_an_unforced_run(tiny_models, oom_above):
    from berteval import models
    from berteval.heads import nsp

    m = models.load(str(tiny_models["pretraining"]))
    pairs = [(TEXTS[i], TEXTS[-1 - i]) for i in range(12)]
    plain = nsp.pretrained_proba(m, pairs)
    calls = oom_above(m.nsp_model, 100)
    forced = nsp.pretrained_proba(m, pairs)
    assert max(calls) > 100
    np.testing.assert_allclose(forced, plain, atol=1e-5)


def test_token_probe_nsp_head_and_qa_windows_batch_by_the_devices_budget(tiny_models, monkeypatch):
    """The GPU's budget (here: a fake one three times the CPU's) reaches every frozen path, as it does the encoder."""
    from berteval import features, models
    from berteval.heads import nsp, tokens
    from berteval.qa import inference
    from berteval.qa.windows import make_windows

    m = models.load(str(tiny_models["pretraining"]))
    budgets: list[int] = []
    real = devices.batched
    monkeypatch.setattr(devices, "token_budget", lambda cpu_budget, device=None: 3 * cpu_budget)
    monkeypatch.setattr(devices, "batched", lambda lengths, budget, run, max_batch=None: budgets.append(budget)
                        or real(lengths, budget, run, max_batch))
    features.encode(m, TEXTS[:4], data_sha256="b", poolings=["cls"], progress=False, use_cache=False)
    tokens.token_states(m, TEXTS[:4], [-1], 64, "fp32", "attention")
    nsp.pretrained_proba(m, [(TEXTS[0], TEXTS[1])])
    windows = make_windows(m.tokenizer, ["was it good"], ["the film was good ."], max_length=64, doc_stride=16)
    inference.window_logits(inference.head_model(m), m.tokenizer, windows)
    cpu = features.token_budget("fp32")
    assert budgets == [3 * cpu, 3 * cpu, 3 * cpu, 3 * inference.MAX_TOKENS]


def test_feature_cache_keys_name_a_precision_fallback_off_the_cpu_only(tiny_models, fake_gpu):
    from berteval import features, models

    m = models.load(str(tiny_models["pretraining"]))
    cpu = {d: features.key_fields(m, "k", 128, d) for d in ("fp32", "bf16")}
    assert all("precision" not in k for k in cpu.values())  # CPU cache keys as they always were
    fake_gpu(7)
    assert features.key_fields(m, "k", 128, "fp32") == cpu["fp32"]
    assert features.key_fields(m, "k", 128, "bf16") == {**cpu["bf16"], "precision": "fp32"}
