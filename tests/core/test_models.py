"""Model loading: what the checkpoint really holds, and clear errors when it cannot load."""

import pytest

from berteval import models
from berteval.errors import BertevalError


def test_pretraining_checkpoint_reports_pooler_and_nsp_head(tiny_models):
    m = models.load(str(tiny_models["pretraining"]))
    assert m.source == "local"
    assert m.heads.has_pooler and m.heads.pooler_pretrained and m.heads.pooler_trained
    assert m.heads.has_nsp_head and m.nsp_model is not None
    assert m.revision.startswith("sha256:")
    assert m.tokenizer.is_fast


def test_base_checkpoint_has_no_nsp_head(tiny_models):
    m = models.load(str(tiny_models["base"]))
    assert m.heads.pooler_pretrained
    assert not m.heads.has_nsp_head and m.nsp_model is None
    assert any("seq_relationship" in k for k in m.heads.missing_keys)


def test_missing_pooler_is_reported_random(tiny_models):
    m = models.load(str(tiny_models["nopooler"]))
    assert not m.heads.pooler_pretrained
    assert m.heads.pooler_provenance.startswith("random")


def test_default_model_is_embedded_and_its_pooler_untrained():
    m = models.load("default")
    assert m.source == "default" and m.model_id == models.DEFAULT_MODEL_ID
    assert m.hidden_size == 384 and m.num_hidden_states == 7
    assert m.heads.pooler_pretrained and not m.heads.has_nsp_head
    # all-MiniLM-L6-v2 ships pooler weights that no objective trained (bias exactly zero).
    assert m.heads.pooler_trained is False
    assert "never trained" in m.heads.pooler_provenance


def test_unknown_local_path_is_a_clear_error(tmp_path):
    with pytest.raises(BertevalError, match="not an existing local folder"):
        models.load(str(tmp_path / "nope"))


def test_folder_without_config_is_a_clear_error(tmp_path):
    with pytest.raises(BertevalError, match="no config.json"):
        models.load(str(tmp_path))


def test_hub_id_offline_names_the_offline_situation(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(BertevalError, match="not reachable.*local folder"):
        models.load("no-such-org/no-such-model-berteval")
