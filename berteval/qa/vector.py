"""Span QA read from one vector: what a classifier's head does when the answer is a position.

The span head everyone uses (`heads.SpanHead`, BertForQuestionAnswering's) gives every
token two logits. A sentence classifier reads one pooled vector instead. This module gives
span QA that classifier's view, to measure what it loses: the window is pooled into one
vector (`cls`, `pooler`, `mean`, ... from the pooling registry), and one
`Linear(width, 2 x max_length)` maps it to a start and an end logit for every *position* of
the window, a choice among positions, as a classifier chooses among classes. Training
masks the choice to the window's context tokens plus [CLS] (position 0, BERT's label for "the
answer is not in this window"); decoding, n-best and scoring are the per-token head's own
(`inference.spans`), which consider context tokens only.

Same frozen encoder, same training windows and questions, same evaluation path as the
per-token probe. Each window is pooled by `features.encode_batch`, the function that pools
SST-2 sentences, in one pass over the training windows for every pooling of the run; on dev,
one pass serves every pooling and seed too: the first cell computes all of them per batch
and later cells reuse them (the batches repeat exactly, so they are keyed by their tokens).
"""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import numpy as np
import torch

from .. import devices, features
from .windows import Windows

class VectorSpanHead(torch.nn.Module):
    """pooled vector (B, width) -> start and end logits over the window's positions (B, L) each."""

    def __init__(self, width: int, max_length: int):
        super().__init__()
        self.max_length = max_length
        self.positions = torch.nn.Linear(width, 2 * max_length)

    def logits(self, vec: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        start, end = self.positions(vec.float()).view(-1, 2, self.max_length).unbind(1)  # (B, L) each
        return start, end

    def forward(self, vec, position_mask, start_positions, end_positions):
        ce = torch.nn.functional.cross_entropy
        start, end = (x.masked_fill(~position_mask, -1e4) for x in self.logits(vec))  # (B, L): context + [CLS]
        return (ce(start, start_positions) + ce(end, end_positions)) / 2


def position_masks(windows: Windows, max_length: int) -> torch.Tensor:
    """(W, L) True where an answer may start or end in training: the context tokens, and [CLS] (no answer here)."""
    mask = torch.zeros(len(windows), max_length, dtype=torch.bool)
    for w, offs in enumerate(windows.offsets):
        mask[w, [t for t, o in enumerate(offs) if o is not None]] = True
    mask[:, 0] = True
    return mask


def vector_collate(vectors: torch.Tensor, masks: torch.Tensor, windows: Windows):
    """Batches of pooled window vectors (N, width) with their position masks and start/end labels."""
    def collate(idx: list[int]) -> dict:
        return {"vec": vectors[idx], "position_mask": masks[idx],
                "start_positions": torch.as_tensor(windows.start_positions[idx]),
                "end_positions": torch.as_tensor(windows.end_positions[idx])}

    return collate


@torch.inference_mode()
def pooled_windows(loaded, windows: Windows, poolings: list[str], dtype: str,
                   batch: int = 16) -> dict[str, torch.Tensor]:
    """{pooling: (W, width) float32}: every window through the frozen encoder once, every pooling from that pass."""
    lengths = np.array([len(f["input_ids"]) for f in windows.features])
    order = np.argsort(-lengths, kind="stable")  # similar lengths together: little padding
    out: dict[str, torch.Tensor] = {}
    for i in range(0, len(order), batch):
        idx = order[i : i + batch]
        padded = devices.to(dict(loaded.tokenizer.pad([windows.features[j] for j in idx], return_tensors="pt")))
        for (name, _), vec in features.encode_batch(loaded, padded, poolings, [-1], dtype).items():
            if name not in out:
                out[name] = torch.zeros(len(windows), vec.shape[1])
            out[name][torch.as_tensor(idx)] = vec.cpu()  # (B, width)
    return out


class VectorQA(torch.nn.Module):
    """What `inference.spans` calls on dev: tokens -> the pooled vector -> start/end logits per position.

    `memo` is shared by every cell of a run: the first cell pools each dev batch with every pooling
    the run needs (one encoder pass), later cells read their pooling from it."""

    def __init__(self, loaded, pooling: str, head: VectorSpanHead, poolings: list[str], dtype: str, memo: dict):
        super().__init__()
        self.loaded, self.pooling, self.head = loaded, pooling, head
        self.poolings, self.dtype, self.memo = poolings, dtype, memo

    def _pooled(self, batch: dict) -> torch.Tensor:
        ids = batch["input_ids"]
        key = hashlib.sha256(ids.cpu().numpy().tobytes() + str(tuple(ids.shape)).encode()).hexdigest()
        if key not in self.memo:
            pooled = features.encode_batch(self.loaded, batch, self.poolings, [-1], self.dtype)
            self.memo[key] = {name: vec for (name, _), vec in pooled.items()}
        return self.memo[key][self.pooling]  # (B, width)

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        batch = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            batch["token_type_ids"] = token_type_ids
        t = input_ids.shape[1]
        start, end = (x[:, :t].masked_fill(attention_mask == 0, -1e4) for x in self.head.logits(self._pooled(batch)))
        return SimpleNamespace(start_logits=start, end_logits=end)  # (B, T) each, as a QA model returns them
