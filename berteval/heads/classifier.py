"""A sentence(-pair) classifier trained end to end: encoder -> pooling -> dropout -> Linear.

It mirrors `BertForSequenceClassification` (dropout, then one `Linear(width, labels)`),
except that the vector it reads comes from the pooling registry (`cls`, `pooler`, the
seed's choice, `mean`, ...), and the head's width is the pooling's own (a pooling may be
wider than the hidden size). A pooling with parameters of its own (`attention`) builds them
here as a submodule, so the optimiser trains them with the encoder and the head.
"""

from __future__ import annotations

import numpy as np
import torch

from .. import features, pooling, precision


class PooledClassifier(torch.nn.Module):
    """encoder -> pooling (registry) -> dropout -> Linear(width, n_labels)."""

    def __init__(self, encoder: torch.nn.Module, pooling_name: str, n_labels: int, regression: bool = False):
        super().__init__()
        self.encoder = encoder
        self.pooling = pooling_name
        spec = pooling.POOLINGS[pooling_name]
        hidden = encoder.config.hidden_size
        self.pool = spec.build(hidden) if spec.trained else None  # the pooling's own parameters, trained here
        self.dropout = torch.nn.Dropout(getattr(encoder.config, "hidden_dropout_prob", 0.1))
        # A score (STS-B) is one output with a squared-error loss, as BertForSequenceClassification with num_labels=1.
        self.regression = regression
        self.classifier = torch.nn.Linear(spec.width(hidden), 1 if regression else n_labels)

    def forward(self, input_ids, attention_mask, token_type_ids=None, labels=None):
        kwargs = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
        all_states = pooling.POOLINGS[self.pooling].needs_all_states
        out = self.encoder(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=all_states,
                           **kwargs)
        vec = pooling.apply(self.pooling, out.last_hidden_state, attention_mask, self.encoder,
                            out.hidden_states if all_states else None, self.pool)  # (B, width)
        logits = self.classifier(self.dropout(vec))  # (B, n_labels), or (B, 1) for a score
        if labels is None:
            return None, logits
        if self.regression:
            return torch.nn.functional.mse_loss(logits.float()[:, 0], labels.float()), logits
        return torch.nn.functional.cross_entropy(logits.float(), labels), logits


class Examples(torch.utils.data.Dataset):
    """Tokenised examples by index; the collate function pads a batch of them."""

    def __init__(self, enc: dict, labels: list[int]):
        self.enc, self.labels = enc, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> int:
        return i


def collate_fn(tokenizer, ds: Examples):
    keys = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in ds.enc]

    def collate(idx: list[int]) -> dict:
        batch = dict(tokenizer.pad([{k: ds.enc[k][i] for k in keys} for i in idx], return_tensors="pt"))
        batch["labels"] = torch.as_tensor([ds.labels[i] for i in idx])
        return batch

    return collate


@torch.inference_mode()
def predict(model: PooledClassifier, loaded, texts: list, max_length: int, dtype: str) -> np.ndarray:
    """(N, n_labels) probabilities (a regression head: (N, 1) scores), in the order of `texts`. The model was just trained (or is being: the
    held-out check between epochs), so bf16 runs as it trained, under autocast over its fp32 weights
    (`precision.MIXED`), with the fp32 token budget: the bf16 fine-tune records keep reproducing."""
    model.eval()
    out = None
    for idx, batch in features.padded_batches(loaded, texts, max_length):
        with precision.autocast(dtype):
            _, logits = model(**batch)
        # A score is the output itself; classes get their softmax.
        p = logits.float().cpu().numpy() if model.regression else torch.softmax(logits.float(), -1).cpu().numpy()
        if out is None:
            out = np.zeros((len(texts), p.shape[1]), dtype=np.float32)
        out[idx] = p
    return out
