"""The bench verb end to end on the tiny model, its FLOP count, and the encoder path's vectors."""

import json

import numpy as np
import pytest
from transformers import BertConfig

from berteval import features, models
from berteval.bench import encoders as bench
from berteval.bench import squad_dtypes
from berteval.cli import main
from berteval.errors import BertevalError

from conftest import tiny_config


def test_flops_of_a_known_config_by_hand():
    cfg = tiny_config()  # hidden 16, intermediate 32, 2 layers
    # per token and layer: 2 * (4*16*16 + 2*16*32) = 4096; per sequence: 4 * 16 * T^2
    want = 2 * (4096 * (3 + 5) + 4 * 16 * (3**2 + 5**2))
    assert bench.encoder_flops(cfg, [3, 5]) == want
    minilm = BertConfig(hidden_size=384, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=12)
    # one 128-token sequence: 6 layers * (3,538,944 FLOPs per token * 128 + 4 * 384 * 128^2)
    assert bench.encoder_flops(minilm, [128]) == 6 * (3_538_944 * 128 + 4 * 384 * 128**2)


def test_bench_verb_runs_end_to_end_on_the_tiny_model(tiny_models, tiny_sst2, tmp_path, capsys):
    out = tmp_path / "bench.json"
    rc = main(["bench", "--model", str(tiny_models["pretraining"]), "--data-dir", str(tiny_sst2),
               "--sentences", "10", "--windows", "5", "--window-length", "32", "--repeats", "2", "--json", str(out),
               "--bf16-budgets", "64,4096", "--sections", "encoders"])
    assert rc == 0
    text = capsys.readouterr().out
    for path in ("berteval fp32", "berteval bf16 (weights)", "berteval bf16 (autocast)", "transformers pipeline fp32",
                 "sentence-transformers fp32"):
        assert text.count(path) >= 2, path  # a row in each section
    assert text.count("64-token batches") == 1  # the extra budget, once; 4096 is the default row
    assert "matmul peak: fp32" in text and "SST-2 dev from" in text and "built-in sample" in text
    assert text.count(" ok") == 2, "fp32 pooled vectors agree with both peers"
    rep = json.loads(out.read_text())["encoders"]
    assert {t["section"] for t in rep["timings"]} == {"sentences", "qa windows"}
    for t in rep["timings"]:
        assert len(t["times_s"]) == 2 and t["per_s"] > 0 and t["gflop"] > 0
        assert t["n_items"] == (10 if t["section"] == "sentences" else 5)
    assert all(v <= bench.PARITY_TOL for v in rep["parity"].values())
    assert set(rep["bf16"]) == {f"{s}, bf16 ({how})" for s in ("sentences", "qa windows") for how in ("weights", "autocast")}
    assert all(f["lowest_cosine"] > 0.99 for k, f in rep["bf16"].items() if k.startswith("sentences"))
    assert "bf16 against berteval fp32" in text and "attention: sdpa" in text


def test_qa_windows_are_the_runs_windows_and_peers_get_the_same_text(tiny_models):
    m = models.load(str(tiny_models["pretraining"]))
    questions = [("good movie ?", " ".join(["the plot was very dull and the acting poor ."] * 12))]
    w = bench.qa_windows(m.tokenizer, questions, 3, 32)
    assert len(w) == 3 and all(len(f["input_ids"]) == 32 for f in w.features)
    texts = bench.window_texts(m.tokenizer, w, questions)
    ids = m.tokenizer(texts, truncation=True, max_length=32)["input_ids"]
    # the same words in the same places; only a word piece cut at a window edge may differ
    assert all(abs(len(a) - len(f["input_ids"])) <= 1 for a, f in zip(ids, w.features))


def test_bf16_vectors_stay_close_to_fp32_and_come_back_as_float32(tiny_models):
    m = models.load(str(tiny_models["pretraining"]))
    texts = ["good movie", "the plot was very dull and the acting poor", "fun"]
    kw = dict(data_sha256="b", poolings=["cls", "mean"], use_cache=False, progress=False)
    f32 = features.encode(m, texts, dtype="fp32", **kw).vectors
    f16 = features.encode(m, texts, dtype="bf16", **kw).vectors
    for k in f32:
        assert f16[k].dtype == np.float32
        np.testing.assert_allclose(f16[k], f32[k], atol=0.05)
    with pytest.raises(BertevalError, match="unknown dtype"):
        features.encode(m, texts, dtype="fp16", **kw)


def test_squad_by_dtype_scores_the_same_model_in_each_dtype(tiny_models, tmp_path):
    from berteval.qa import inference as qa

    context = "the movie was good and the plot was very dull . " * 4
    qas = [{"id": f"q{i}", "question": "what was the plot", "answers": [{"text": "very dull", "answer_start": 36}]}
           for i in range(3)]
    doc = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}
    (tmp_path / "squad").mkdir()
    for name in ("dev-v1.1.json", "train-subset.json"):
        (tmp_path / "squad" / name).write_text(json.dumps(doc))
    m = models.load(str(tiny_models["pretraining"]))
    span = qa.QAModel(qa.head_model(m), m.tokenizer, "tiny")
    paths = (*squad_dtypes.SQUAD_PATHS, bench.BF16_AUTOCAST)
    source, rows = squad_dtypes.squad_by_dtype(tmp_path, span, limit=2, max_length=32, paths=paths, log=lambda _: None)
    assert [r.dtype for r in rows] == ["fp32", "bf16 (weights)", "bf16 (autocast)"] and source == "tiny"
    assert all(r.n_questions == 2 and r.n_windows >= 2 and 0 <= r.f1 <= 100 for r in rows)
    text = squad_dtypes.format_squad(source, rows)
    assert "bf16 (weights) - fp32: EM" in text and "bf16 (autocast) - fp32: EM" in text


# slow: every bench section on the tiny model in one process (about 22 CPU s); the fast end-to-end test is below
@pytest.mark.slow
def test_bench_reports_ablation_memory_and_latency_in_one_run(tiny_models, tiny_sst2, tmp_path, capsys):
    """The other sections on the tiny model: the ablation runs both probe commands from cold caches and finds
    every cell, memory measures each setting in its own process, latency times the forward passes (the tiny
    model has no committed head, so the served calls are left out with a note, not an error)."""
    out = tmp_path / "bench.json"
    rc = main(["bench", "--model", str(tiny_models["pretraining"]), "--data-dir", str(tiny_sst2), "--sections",
               "ablation,memory,latency", "--memory-steps", "2", "--memory-batch", "2", "--window-length", "32",
               "--latency-calls", "3", "--json", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    rep = json.loads(out.read_text())
    assert set(rep) == {"ablation", "memory", "latency"}
    narrow, wide = rep["ablation"]
    assert (narrow["poolings"], narrow["cells"]) == (["mean"], 3)
    assert (wide["poolings"], wide["cells"]) == (["cls", "pooler", "mean", "max"], 12)
    assert all(r["encode_s"] > 0 and r["fits_s"] > 0 and r["wall_s"] >= r["encode_s"] for r in rep["ablation"])
    assert "the 4-pooling run costs" in text
    from berteval.bench import memory

    assert [r["setting"] for r in rep["memory"]] == list(memory.SETTINGS)
    for r in rep["memory"]:
        assert r["steps"] == 2 and r["peak_mb"] >= r["first_step_mb"] >= r["model_mb"] > 0 and r["end_mb"] > 0
    rows = rep["latency"]["rows"]
    assert {(r["what"].split(" (")[0], r["what"].rsplit(", ", 1)[1], r["threads"]) for r in rows} == {
        (what, dtype, k) for what in ("classify forward", "QA forward") for dtype in ("fp32", "bf16 weights")
        for k in (1, 2)}
    assert all(r["p50_ms"] > 0 and r["n"] == 3 for r in rows)
    assert "serve rows left out" in rep["latency"]["notes"][0] and "serve rows left out" in text


def test_bench_refuses_an_unknown_section(capsys):
    assert main(["bench", "--sections", "encoders,speed"]) == 2
    assert "--sections: unknown speed; choose from encoders, ablation, memory, latency" in capsys.readouterr().err


def test_squad_step_times_each_setting_on_the_same_windows(tiny_models, tiny_squad_qa, tmp_path, capsys):
    """The squad-step section on the tiny model and SQuAD fixture: every setting trains real windows of the train
    set (the subset: the fixture has no full set), the batch-4 settings the same ones, and one epoch is projected
    from each setting's own batching."""
    from berteval.bench import squad_step

    out = tmp_path / "bench.json"
    rc = main(["bench", "--model", str(tiny_models["pretraining"]), "--data-dir", str(tiny_squad_qa), "--sections",
               "squad-step", "--window-length", "32", "--squad-step-steps", "2", "--squad-step-sample", "40",
               "--squad-step-batch", "4", "--squad-step-large-batch", "8", "--threads", "1", "--json", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    rep = json.loads(out.read_text())["squad-step"]
    assert rep["train_source"] == "train-subset.json" and rep["n_questions"] == 18 and rep["recipe"] == "lora-plus"
    assert rep["activation_checkpointing"] and rep["pool"] == 40 and rep["timed_windows"] == 8
    names = [r["setting"] for r in rep["rows"]]
    assert names == [s.name for s in squad_step.settings(32, 4, 8)]
    assert names[:4] == ["padded to 32, fp32, random batches", "padded to the batch's longest, fp32, random batches",
                         "length-grouped, fp32", "length-grouped, bf16 autocast"]
    for r in rep["rows"]:
        assert r["steps"] == 2 and len(r["step_times_s"]) == 2 and r["s_per_step"] > 0 and r["epoch_s"] > 0
        assert r["windows_per_s"] > 0 and r["tokens_per_s"] > 0 and np.isfinite(r["mean_loss"])
        assert r["epoch_steps"] == -(-rep["n_windows"] // r["batch_size"])
        assert r["same_windows"] == (r["batch_size"] == 4)
    padded, longest, grouped = rep["rows"][:3]
    assert padded["epoch_padding_share"] >= longest["epoch_padding_share"] >= grouped["epoch_padding_share"]
    assert padded["padding_share"] >= longest["padding_share"]
    assert len({(r["windows"], r["real_tokens"]) for r in rep["rows"][:4]}) == 1  # the same windows in each
    assert rep["rows"][0]["windows"] == 8 and rep["rows"][4]["windows"] == 16
    assert "SQuAD span-QA fine-tune steps" in text and "tokens/s x" in text and "length-grouped, bf16 autocast" in text
    assert "a larger batch trains on other windows of the same pool" in text


def test_squad_step_batches_share_windows_and_follow_the_runs_sampler():
    """The warm-up batch is the pool's longest; the random batches hold exactly the timed grouped windows; the
    projected epoch pads as the run's sampler batches (every window to its batch's longest)."""
    from berteval.bench import squad_step
    from berteval.training import LengthGroupedBatches
    from berteval.seeds import torch_generator

    lengths = np.random.default_rng(0).integers(20, 385, size=800)
    picked = squad_step.pick_batches(lengths, 32, 6, seed=0)
    assert len(picked) == 7 and all(len(b) == 32 for b in picked)
    assert lengths[picked[0]].max() == max(lengths[b].max() for b in picked)
    assert len({i for b in picked for i in b}) == 7 * 32  # no window twice
    dealt = squad_step.random_batches(picked[1:], 32, seed=0)
    assert sorted(i for b in dealt for i in b) == sorted(i for b in picked[1:] for i in b) and dealt != picked[1:]
    assert squad_step.pick_batches(lengths, 32, 6, seed=0) == picked  # seeded
    grouped = squad_step.settings(384, 32)[2]
    pad = squad_step.epoch_padded_lengths(lengths, grouped, 384, seed=0)
    for b in LengthGroupedBatches(lengths, 32, torch_generator(0, "train"))._batches():
        assert (pad[b] == lengths[b].max()).all()
    assert (squad_step.epoch_padded_lengths(lengths, squad_step.settings(384, 32)[0], 384, 0) == 384).all()
    with pytest.raises(BertevalError, match="raise --squad-step-sample"):
        squad_step.pick_batches(lengths[:100], 32, 6, seed=0)


def test_squad_step_reads_the_full_train_set_where_the_run_would(tmp_path):
    from berteval.bench import squad_step

    (tmp_path / "squad").mkdir()
    (tmp_path / "squad" / "train-subset.json").write_text("{}")
    assert squad_step.train_set_of(tmp_path) == "subset"
    (tmp_path / "squad" / "train-v1.1-reconstructed.json").write_text("{}")
    assert squad_step.train_set_of(tmp_path) == "full"


def test_squad_step_is_named_not_run_by_default(tiny_models, capsys, monkeypatch):
    from berteval import bench

    monkeypatch.delenv("BERTEVAL_DATA", raising=False)

    assert "squad-step" in bench.SECTIONS and "squad-step" not in bench.DEFAULT_SECTIONS
    assert main(["bench", "--model", str(tiny_models["pretraining"]), "--sections", "squad-step"]) == 0
    assert "squad-step: left out" in capsys.readouterr().out
