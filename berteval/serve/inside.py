"""Inside BERT, on one input: what `last_hidden_state` and `pooler_output` are, in numbers.

The app's "Inside BERT" tab shows the two outputs' shapes, recomputes `pooler_output` by
hand as tanh(W·h_[CLS] + b) from the pooler's own weights (and shows that it matches the
model's, to float precision), and says how far apart the three vectors a classifier
could read are (cosine of `cls`, `pooler`, `mean`), next to what the checkpoint's
pooler is (pretrained, never trained, random, absent).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .. import devices, models, pooling
from .reading import Reading, measure


@dataclass
class InsideReport:
    model_id: str
    tokens: list[str]
    last_hidden_state_shape: tuple[int, ...]  # (1, T, H)
    pooler_output_shape: tuple[int, ...] | None  # (1, H); None where the architecture has no pooler
    pooler_by_hand_max_abs_diff: float | None  # |tanh(W h_CLS + b) - pooler_output|, max over H
    pooler_formula: str  # what "by hand" computed, or why it could not
    cosine: dict[tuple[str, str], float] = field(default_factory=dict)  # over the pairs of cls/pooler/mean
    norms: dict[str, float] = field(default_factory=dict)  # L2 norm of each vector
    pooler_provenance: str = ""
    reading: Reading | None = None  # how much of the input was read (cut at max_length)


def _cos(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a, b, dim=-1)[0])


@torch.inference_mode()
def look_inside(model: models.LoadedModel, text: str, max_length: int = 128) -> InsideReport:
    enc = devices.to(dict(model.tokenizer(text, truncation=True, max_length=max_length, return_tensors="pt")))
    out = model.encoder(**enc)
    hidden = out.last_hidden_state  # (1, T, H)
    vectors = {name: pooling.apply(name, hidden, enc["attention_mask"], model.encoder) for name in ("cls", "mean")}  # (1, H)
    pooled = getattr(out, "pooler_output", None)  # (1, H) or None (DistilBERT has no pooler)
    diff, formula = None, f"{model.model_id} has no pooler layer, so there is no pooler_output to recompute"
    dense = getattr(getattr(model.encoder, "pooler", None), "dense", None)
    if pooled is not None and isinstance(dense, torch.nn.Linear):
        # BERT's pooler: one Linear on the first token's final state, then tanh.
        by_hand = torch.tanh(hidden[:, 0] @ dense.weight.T + dense.bias)  # (1, H)
        diff = float((by_hand - pooled).abs().max())
        formula = f"tanh(W·h_[CLS] + b) with W {tuple(dense.weight.shape)} and b {tuple(dense.bias.shape)}"
    elif pooled is not None:
        formula = f"{type(model.encoder.pooler).__name__} is not a Linear + tanh pooler; not recomputed"
    if pooled is not None:
        vectors = {"cls": vectors["cls"], "pooler": pooled, "mean": vectors["mean"]}
    names = list(vectors)
    cosine = {(a, b): _cos(vectors[a], vectors[b]) for i, a in enumerate(names) for b in names[i + 1:]}
    return InsideReport(
        model_id=model.model_id,
        tokens=model.tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist()),
        last_hidden_state_shape=tuple(hidden.shape),
        pooler_output_shape=tuple(pooled.shape) if pooled is not None else None,
        pooler_by_hand_max_abs_diff=diff,
        pooler_formula=formula,
        cosine=cosine,
        norms={n: float(v.norm()) for n, v in vectors.items()},
        pooler_provenance=model.heads.pooler_provenance,
        reading=measure(model.tokenizer, text, max_length),
    )
