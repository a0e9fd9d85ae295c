"""Every BERT pre-trained here and committed (leaderboard/results/encoders/<name>, a `PRETRAINED` name) loads
offline as a standard checkpoint: `AutoModelForPreTraining` and `AutoModelForNextSentencePrediction` with no
newly initialised weight (a control's NSP head is there, as initialised, not missing), `pipeline("fill-mask")`,
every file under the 9.5 MiB a Space takes without LFS, and a `derivation.json` that says how it was made. A
twin published later (the second generation) is checked by the same test the moment its folder is committed."""

from __future__ import annotations

import json

import pytest

from berteval.models import pretrained

COMMITTED = [n for n in pretrained.PRETRAINED if (pretrained.folder(n) / pretrained.RECORD).is_file()]
LIMIT = int(9.5 * 1024 * 1024)


def test_the_first_generation_is_among_them():
    assert {"wiki-bert-mini", "wiki-bert-mini-nonsp"} <= set(COMMITTED)


@pytest.mark.parametrize("name", COMMITTED)
def test_a_committed_twin_loads_as_a_standard_bert_checkpoint(name):
    from transformers import AutoModelForNextSentencePrediction, AutoModelForPreTraining, pipeline

    folder = pretrained.folder(name)
    for path in folder.iterdir():
        assert path.stat().st_size < LIMIT, path
    for auto in (AutoModelForPreTraining, AutoModelForNextSentencePrediction):
        _, info = auto.from_pretrained(str(folder), output_loading_info=True)
        assert not info["missing_keys"] and not info["mismatched_keys"], (auto.__name__, info)
    fill = pipeline("fill-mask", model=str(folder))
    guesses = fill("The river flows into the [MASK].")
    assert len(guesses) == 5 and all("[MASK]" not in g["sequence"] for g in guesses)
    record = json.loads((folder / pretrained.RECORD).read_text())
    assert record["training"]["tokens_seen"] > 0 and record["training"]["steps"] > 0
    assert record["hyperparameters"] and record["evaluations"]  # the recipe and the curves
    assert record["nsp_trained"] == pretrained.PRETRAINED[name].nsp
