"""Activation checkpointing in span-QA fine-tunes (issue 17, memory): the layers' activations are recomputed
in the backward pass instead of kept (and glibc's mmap threshold is fixed), and the trained weights are the same bit for bit, so the run id (which
does not name it) still means one result."""

import platform

import pytest

from berteval import runs, training
from conftest import squad_spec


@pytest.mark.parametrize("regime", ["finetune", "finetune-full"])
def test_recomputed_activations_train_the_same_weights(regime, tiny_models, tiny_squad_qa, tmp_path):
    out = {}
    for on in (False, True):  # False: --no-activation-checkpointing
        rep = runs.run(squad_spec(tiny_models["pretraining"], tiny_squad_qa, tmp_path / str(on), regime, epochs=2,
                             activation_checkpointing=on))
        out[on] = rep.written[0]
    plain, recomputed = out[False], out[True]
    assert plain.run_id == recomputed.run_id  # not part of the identity: it changes no weight
    assert recomputed.config["training"]["activation_checkpointing"] is True
    assert plain.config["training"]["activation_checkpointing"] is False
    # the lean mode also fixes glibc's mmap threshold (allocation only), and the record says so
    glibc = platform.libc_ver()[0] == "glibc"
    assert recomputed.config["training"].get("mmap_threshold_mb") == (training.MMAP_THRESHOLD >> 20 if glibc else None)
    assert "mmap_threshold_mb" not in plain.config["training"]
    assert plain.config["training"]["last_loss"] == recomputed.config["training"]["last_loss"]
    assert plain.metrics == recomputed.metrics
    files = [plain.predictions_file]
    if "adapter_dir" in plain.config:  # LoRA: the saved adapter (the full recipe keeps none)
        files.append(f"{plain.config['adapter_dir']}/adapter_model.safetensors")
    for name in files:
        assert (tmp_path / "False" / name).read_bytes() == (tmp_path / "True" / name).read_bytes(), name


def test_the_fine_tune_regimes_recompute_and_frozen_ones_do_not():
    from berteval.regimes.span import SpanFinetune, SpanPretrained

    assert SpanFinetune.checkpoint_activations and not SpanPretrained.checkpoint_activations
