"""A checkpoint's own next-sentence (NSP) head: required to be real, scored as is.

transformers attaches a randomly initialised NSP head to any checkpoint that lacks one
(all-MiniLM-L6-v2 has none), so everything here refuses such a checkpoint rather than
report noise as BERT's head. Label order, BERT's: index 0 = IsNext (B follows A),
index 1 = NotNext.
"""

from __future__ import annotations

import numpy as np
import torch

from .. import features, models, precision
from ..errors import BertevalError

PAIR_MAX_LENGTH = 128  # tokens for [CLS] A [SEP] B [SEP] when the run does not say


def require_pretrained_head(model: models.LoadedModel) -> torch.nn.Module:
    """The checkpoint's NSP model, or a refusal that says why and what to run instead."""
    if model.nsp_model is not None:
        return model.nsp_model
    missing = [k for k in model.heads.missing_keys if "seq_relationship" in k]
    why = (f"the checkpoint lacks {', '.join(missing)}" if missing
           else "its architecture has no next-sentence head")
    raise BertevalError(
        f"model {model.model_id!r} has no pretrained next-sentence (NSP) head ({why}). transformers would "
        f"silently attach a randomly initialised head, and its accuracy would be noise, not the model's. "
        f"Use --regime probe to train a probe on its pooled vectors, or a model with an NSP-trained head: "
        f"offline default+nsp-pooler or default+mlm-nsp, on the hub a checkpoint such as bert-base-uncased."
    )


@torch.inference_mode()
def pretrained_proba(model: models.LoadedModel, pairs: list[tuple[str, str]], max_length: int = PAIR_MAX_LENGTH,
                     dtype: str = "fp32") -> np.ndarray:
    """(N, 2) softmax of the checkpoint's NSP logits: column 0 = P(IsNext), column 1 = P(NotNext). Nothing
    is trained here, so bf16 runs on the NSP model's bf16 copy (`precision.FROZEN`)."""
    head = require_pretrained_head(model)
    out = np.zeros((len(pairs), 2), dtype=np.float32)

    def run(idx, batch: dict) -> None:
        with precision.running(head, dtype) as nsp:
            logits = nsp(**batch).logits  # (B, 2): seq_relationship, index 0 = IsNext
        out[idx] = torch.softmax(logits.float(), dim=-1).cpu().numpy()

    # The device's token budget, halved on a GPU out-of-memory error (features.each_batch), as the encoder's.
    features.each_batch(model, pairs, max_length, features.device_budget(dtype), run)
    return out
