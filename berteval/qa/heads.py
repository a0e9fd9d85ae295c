"""What the span-QA regimes train: a span head on cached hidden states (probe) or a whole
QA model (fine-tune), with their datasets and batches.

Why two logits per token: an answer is a span of the context, so the head (one
`Linear(hidden, 2)` over `last_hidden_state`, as in BertForQuestionAnswering) scores
every token as a possible start and as a possible end, where classification reads a
single pooled vector.
"""

from __future__ import annotations

import numpy as np
import torch

from .. import devices, precision
from .windows import Windows


class SpanHead(torch.nn.Module):
    """The span head alone, trained on cached hidden states: logits = Linear(hidden, 2) per token."""

    def __init__(self, qa_outputs: torch.nn.Linear):
        super().__init__()
        self.qa_outputs = qa_outputs

    def forward(self, hidden, attention_mask, start_positions, end_positions):
        logits = self.qa_outputs(hidden.float())  # (B, T, 2)
        pad = attention_mask == 0
        start, end = (x.squeeze(-1).masked_fill(pad, -1e4) for x in logits.split(1, dim=-1))  # (B, T) each
        ce = torch.nn.functional.cross_entropy
        return (ce(start, start_positions) + ce(end, end_positions)) / 2


class WindowSet(torch.utils.data.Dataset):
    """Training windows by index; the collate function builds the batch."""

    def __init__(self, windows: Windows):
        self.w = windows

    def __len__(self) -> int:
        return len(self.w)

    def __getitem__(self, i: int) -> int:
        return i


def window_collate(tokenizer, windows: Windows):
    """Padded token batches with their start/end labels (the fine-tune reads tokens)."""
    def collate(idx: list[int]) -> dict:
        batch = dict(tokenizer.pad([windows.features[i] for i in idx], return_tensors="pt"))
        batch["start_positions"] = torch.as_tensor(windows.start_positions[idx])
        batch["end_positions"] = torch.as_tensor(windows.end_positions[idx])
        return batch

    return collate


def hidden_collate(hidden: list[torch.Tensor], windows: Windows):
    """Padded cached hidden states with their start/end labels (the probe reads states, not tokens)."""
    def collate(idx: list[int]) -> dict:
        h = torch.nn.utils.rnn.pad_sequence([hidden[i] for i in idx], batch_first=True)  # (B, T, H)
        mask = torch.nn.utils.rnn.pad_sequence([torch.ones(len(hidden[i]), dtype=torch.long) for i in idx],
                                               batch_first=True)
        return {"hidden": h, "attention_mask": mask,
                "start_positions": torch.as_tensor(windows.start_positions[idx]),
                "end_positions": torch.as_tensor(windows.end_positions[idx])}

    return collate


def qa_loss(model, batch):
    return model(**batch).loss  # mean of the start and end cross-entropies


@torch.inference_mode()
def hidden_states(tokenizer, model: torch.nn.Module, windows: Windows, dtype: str) -> list[torch.Tensor]:
    """last_hidden_state of every window, once: a frozen encoder gives the same vectors every
    epoch, so the probe pays one forward pass instead of one per epoch. The encoder is frozen, so bf16
    runs on the QA model's bf16 copy (`precision.FROZEN`), as the probe's evaluation does."""
    out: list[torch.Tensor | None] = [None] * len(windows)
    lengths = np.array([len(f["input_ids"]) for f in windows.features])
    order = np.argsort(-lengths, kind="stable")
    for i in range(0, len(order), 16):
        idx = order[i : i + 16]
        batch = devices.to(dict(tokenizer.pad([windows.features[j] for j in idx], return_tensors="pt")))
        with precision.running(model, dtype) as m:
            hidden = m.base_model(**batch).last_hidden_state  # (B, T, H)
        for row, j in enumerate(idx):
            out[j] = hidden[row, : lengths[j]].to(torch.bfloat16).cpu()  # bf16 storage halves the memory
    return out
