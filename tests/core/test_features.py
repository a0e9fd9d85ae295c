"""Encode once: every pooling and layer from one pass, equal to a direct forward, cached."""

import numpy as np
import pytest
import torch

from berteval import features, models, pooling
from berteval.errors import BertevalError
from berteval.regimes.grid import parse_layers

TEXTS = ["good movie", "the plot was very dull and the acting poor", "fun", "it is a fine film ."]


def test_layers_resolve_to_canonical_ids():
    assert parse_layers(None, 7) == [-1]
    assert parse_layers("-1,6,-2,3,5", 7) == [-1, 5, 3]
    with pytest.raises(BertevalError, match="does not exist"):
        parse_layers("7", 7)
    with pytest.raises(BertevalError, match="comma-separated integers"):
        parse_layers("last", 7)


def test_vectors_equal_a_direct_forward_for_every_pooling_and_layer(tiny_models):
    m = models.load(str(tiny_models["pretraining"]))
    # a trained pooling is never cached; a bi-encoder one reads pairs (its own test below)
    names = [p for p, spec in pooling.POOLINGS.items() if not spec.trained and not spec.separate]
    res = features.encode(m, TEXTS, data_sha256="t", poolings=names, layers=[-1, 1], max_tokens=8,
                          progress=False)
    # pooler (and first-last-avg) are last-layer only; everything else at both layers
    last_only = {p for p in names if pooling.POOLINGS[p].last_layer_only}
    assert set(res.vectors) == {(p, -1) for p in names} | {(p, 1) for p in names if p not in last_only}
    for i, text in enumerate(TEXTS):  # one at a time: no padding at all
        batch = m.tokenizer([text], return_tensors="pt")
        with torch.no_grad():
            out = m.encoder(**batch, output_hidden_states=True)
        for (name, layer), arr in res.vectors.items():
            hidden = out.last_hidden_state if layer == -1 else out.hidden_states[layer]
            with torch.no_grad():
                want = pooling.apply(name, hidden, batch["attention_mask"], m.encoder, out.hidden_states)[0].numpy()
            np.testing.assert_allclose(arr[i], want, atol=1e-5, err_msg=f"{name}@{layer}")


def test_the_bi_encoder_reading_is_u_v_and_their_distance(tiny_models):
    """bi-mean: A and B each encoded alone (no [SEP] pair input), mean-pooled, read as (u, v, |u - v|)."""
    m = models.load(str(tiny_models["pretraining"]))
    pairs = [("good movie", "the plot was dull"), ("fun", "a very fine film and story")]
    res = features.encode(m, pairs, data_sha256="pairs", poolings=["bi-mean", "cls"], layers=[-1], progress=False)
    for i, (a, b) in enumerate(pairs):
        u, v = (features.encode(m, [t], data_sha256=f"one-{t}", poolings=["mean"], progress=False,
                                use_cache=False).vectors[("mean", -1)][0] for t in (a, b))
        np.testing.assert_allclose(res.vectors[("bi-mean", -1)][i], np.concatenate([u, v, np.abs(u - v)]), atol=1e-5)
    assert res.vectors[("cls", -1)].shape == (2, m.hidden_size)  # the joint reading beside it, as BERT encodes a pair
    with pytest.raises(Exception, match="reads sentence pairs"):
        features.encode(m, ["single"], data_sha256="x", poolings=["bi-mean"], progress=False)


def test_cache_warm_rerun_encodes_nothing_and_adds_only_missing(tiny_models):
    m = models.load(str(tiny_models["pretraining"]))
    first = features.encode(m, TEXTS, data_sha256="c", poolings=["cls", "mean"], progress=False)
    assert first.encoded == len(TEXTS)
    again = features.encode(m, TEXTS, data_sha256="c", poolings=["mean", "cls"], progress=False)
    assert again.encoded == 0
    for k in first.vectors:
        np.testing.assert_array_equal(first.vectors[k], again.vectors[k])
    more = features.encode(m, TEXTS, data_sha256="c", poolings=["cls", "max"], progress=False)
    assert more.encoded == len(TEXTS) and set(more.vectors) == {("cls", -1), ("max", -1)}
    other_data = features.encode(m, TEXTS, data_sha256="other", poolings=["cls"], progress=False)
    assert other_data.encoded == len(TEXTS)  # a different data checksum never reuses vectors


def test_sentence_pairs_use_token_types(tiny_models):
    m = models.load(str(tiny_models["pretraining"]))
    pairs = [("good movie", "bad film"), ("bad film", "good movie")]
    res = features.encode(m, pairs, data_sha256="p", poolings=["cls"], progress=False)
    batch = m.tokenizer(["good movie"], ["bad film"], return_tensors="pt")
    assert batch["token_type_ids"].sum() > 0
    with torch.no_grad():
        want = m.encoder(**batch).last_hidden_state[0, 0].numpy()
    np.testing.assert_allclose(res.vectors[("cls", -1)][0], want, atol=1e-5)


def test_pooler_refused_before_any_encoding(tiny_models):
    m = models.load(str(tiny_models["nopooler"]))
    with pytest.raises(BertevalError, match="pooler"):
        features.encode(m, TEXTS, data_sha256="x", poolings=["cls", "pooler"], progress=False)
