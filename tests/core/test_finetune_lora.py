"""`--regime finetune-lora`: a pooled fine-tune whose LoRA adapter and head are saved beside the record, small,
and load back into the same classifier: the loaded adapter predicts the record's dev labels (or scores) exactly
as the model did at the end of training. Tiny model, tiny GLUE files."""

import json

import numpy as np
import pytest

from berteval import runs
from berteval.errors import BertevalError
from berteval.heads import pooled_adapter
from berteval.heads.classifier import predict
from berteval.tasks import TASKS


def _run(task, model, data, out, **kw):
    kw = {"regime": "finetune-lora", "poolings": ["mean"], "seeds": [0], "epochs": 3.0, "lr": 5e-3, **kw}
    return runs.run(runs.RunSpec(TASKS[task], model=str(model), data_dir=data, out=out, progress=False, **kw))


@pytest.mark.parametrize("task", ["mrpc", "stsb"])
def test_the_adapter_round_trips_to_the_records_dev_predictions(task, glue_dir, tiny_models, tmp_path):
    rep = _run(task, tiny_models["pretraining"], glue_dir, tmp_path)
    rec = rep.written[0]
    folder = tmp_path / rec.config["adapter_dir"]
    assert rec.regime == "finetune-lora" and rec.config["adapter_dir"] == f"adapters/{task}/{rec.run_id}"
    files = sorted(p.name for p in folder.iterdir())
    assert files == ["adapter_config.json", "adapter_model.safetensors", pooled_adapter.INFO]
    assert all(p.stat().st_size < 5 * 2**20 for p in folder.iterdir())
    assert "LoRA" in rec.config["finetune"]["head"] and rec.config["finetune"]["lr"] == 5e-3

    loaded = pooled_adapter.load(folder)
    dev = TASKS[task].load(glue_dir).eval
    out = predict(loaded.model, loaded.loaded, dev.texts, loaded.info["max_length"], "fp32")
    saved = json.loads((tmp_path / rec.predictions_file).read_text())
    if task == "stsb":
        assert np.allclose(out[:, 0], saved["pred"], atol=1e-4)
    else:
        assert out.argmax(1).tolist() == saved["pred"]  # by label, every dev pair
        assert np.allclose(out[:, 1], saved["proba"], atol=1e-4)


def test_the_adapter_moves_only_lora_and_the_head(glue_dir, tiny_models, tmp_path):
    from safetensors.torch import load_file

    rep = _run("rte", tiny_models["pretraining"], glue_dir, tmp_path)
    weights = load_file(str(tmp_path / rep.written[0].config["adapter_dir"] / "adapter_model.safetensors"))
    assert weights and all("lora_" in k or ".classifier." in k or k.startswith("classifier.") for k in weights)
    assert any("pooler.dense.lora_A" in k for k in weights) and any("classifier" in k for k in weights)
    # the encoder's own weights are the base model's: a loaded adapter on a fresh encoder reproduces it
    loaded = pooled_adapter.load(tmp_path / rep.written[0].config["adapter_dir"])
    assert loaded.info["task"] == "rte" and loaded.info["pooling"] == "mean"


def test_its_run_ids_are_its_own_and_a_finished_cell_is_skipped(glue_dir, tiny_models, tmp_path):
    lora = _run("mrpc", tiny_models["pretraining"], glue_dir, tmp_path)
    full = _run("mrpc", tiny_models["pretraining"], glue_dir, tmp_path, regime="finetune")
    assert lora.written[0].run_id != full.written[0].run_id
    assert "adapter_dir" not in full.written[0].config
    again = _run("mrpc", tiny_models["pretraining"], glue_dir, tmp_path)
    assert again.skipped == [lora.written[0].run_id] and not again.written


def test_a_pooling_with_parameters_is_refused(glue_dir, tiny_models, tmp_path):
    with pytest.raises(BertevalError, match="attention has parameters of its own"):
        _run("mrpc", tiny_models["pretraining"], glue_dir, tmp_path, poolings=["attention"])
