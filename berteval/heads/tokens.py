"""The probe for a pooling with parameters (`attention`): token states in memory, a small head trained on them.

A fixed pooling is one cached vector per sentence, and the probe is a logistic regression on
it (`heads.probe`). A pooling with parameters has no fixed vector: the frozen probe has to
keep every token's state and train the pooling's parameters with the head. So this module
(1) collects the token states of a layer once, refusing with a message when they would not
fit in memory, and (2) trains `pooling module -> Linear(width, labels)` on them, scoring
each epoch on the same seeded held-out slice of train the linear probe uses and keeping the
best epoch. States are standardised with train's per-dimension token statistics, as the
linear probe standardises its vectors: a weighted sum of standardised states is the
standardised weighted sum, so this changes the conditioning, not what the head can express.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from .. import features, pooling, precision
from ..errors import BertevalError
from .probe import heldout_split

MEMORY_SHARE = 0.5  # token states may take at most this share of the memory available when the run starts


def available_memory() -> int:
    """Bytes the kernel says a new allocation can get (MemAvailable), or total RAM where that is unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_fits(name: str, n_tokens: int, hidden: int, n_layers: int, n_texts: int) -> None:
    """Refuse before encoding when the token states would not fit, saying what would."""
    need, have = n_tokens * hidden * 4 * n_layers, available_memory()  # fp32 states
    if need > MEMORY_SHARE * have:
        raise BertevalError(
            f"pooling {name!r} as a probe trains on every token's state, held in memory: {n_tokens:,} tokens of "
            f"{n_texts:,} inputs x {n_layers} layer(s) x {hidden} floats = {need / 2**30:.1f} GiB, more than "
            f"{MEMORY_SHARE:.0%} of the {have / 2**30:.1f} GiB available. Run it with --regime finetune, or on fewer "
            f"examples (--limit-train, --train-sizes).")


@torch.inference_mode()
def token_states(model, texts: list, layers: list[int], max_length: int, dtype: str, name: str
                 ) -> dict[int, list[torch.Tensor]]:
    """{layer: [(T_i, H) float32 states of input i's real tokens]}, from one pass over `texts`. The encoder
    is frozen (only the head and the pooling's parameters train, on these states), so bf16 runs on its
    bf16 copy (`precision.FROZEN`) with the frozen path's token budget on the device."""
    lengths = [len(ids) for ids in features.tokenise(model, texts, max_length)["input_ids"]]
    check_fits(name, sum(lengths), model.hidden_size, len(layers), len(texts))
    out: dict[int, list] = {layer: [None] * len(texts) for layer in layers}
    need_all = any(layer != -1 for layer in layers)

    def run(idx, batch: dict) -> None:
        with precision.running(model.encoder, dtype) as encoder:
            enc = encoder(**batch, output_hidden_states=need_all)
        for layer in layers:
            hidden = (enc.last_hidden_state if layer == -1 else enc.hidden_states[layer]).float()  # (B, T, H)
            for row, i in enumerate(idx):
                out[layer][i] = hidden[row, : lengths[i]].cpu().clone()  # (T_i, H): padding dropped, in host memory

    # The device's budget, halved on a GPU out-of-memory error (features.each_batch), as the encoder's.
    features.each_batch(model, texts, max_length, features.device_budget(dtype), run)
    return out


class TokenHead(torch.nn.Module):
    """standardise -> the pooling (its own parameters) -> Linear(width, n_labels)."""

    def __init__(self, name: str, mean: torch.Tensor, std: torch.Tensor, n_labels: int):
        super().__init__()
        spec = pooling.POOLINGS[name]
        self.name = name
        self.register_buffer("mean", mean)  # (H,)
        self.register_buffer("std", std)  # (H,)
        self.pool = spec.build(mean.numel())
        self.classifier = torch.nn.Linear(spec.width(mean.numel()), n_labels)

    def forward(self, hidden, attention_mask, labels=None):
        x = (hidden - self.mean) / self.std  # (B, T, H)
        vec = pooling.apply(self.name, x, attention_mask, None, None, self.pool)  # (B, width)
        logits = self.classifier(vec)  # (B, n_labels)
        loss = torch.nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return loss, logits


def _pad(states: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    hidden = torch.nn.utils.rnn.pad_sequence(states, batch_first=True)  # (B, T, H)
    mask = torch.nn.utils.rnn.pad_sequence([torch.ones(len(s), dtype=torch.long) for s in states],
                                           batch_first=True)  # (B, T): 1 on real tokens
    return hidden, mask


def _collate(states: list[torch.Tensor], labels: np.ndarray):
    def collate(idx: list[int]) -> dict:
        hidden, mask = _pad([states[i] for i in idx])
        return {"hidden": hidden, "attention_mask": mask, "labels": torch.as_tensor(labels[idx])}

    return collate


class _Rows(torch.utils.data.Dataset):
    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i


@torch.inference_mode()
def predict(head: TokenHead, states: list[torch.Tensor], batch_size: int = 256) -> np.ndarray:
    """(N, n_labels) probabilities, in the order of `states`."""
    head.eval()
    out = []
    for i in range(0, len(states), batch_size):
        _, logits = head(*_pad(states[i : i + batch_size]))  # (B, n_labels)
        out.append(torch.softmax(logits, -1))
    return torch.cat(out).cpu().numpy()


@dataclass
class TokenProbeResult:
    pred: np.ndarray  # (N_eval,)
    proba: np.ndarray  # (N_eval, C)
    n_train: int
    n_heldout: int
    heldout_accuracy: list[float] = field(default_factory=list)  # per epoch
    selected_epoch: int | None = None
    steps: int = 0
    train_wall_s: float = 0.0


def fit(name: str, train: list[torch.Tensor], y_train, evals: list[torch.Tensor], seed: int,
        hp: dict) -> TokenProbeResult:
    """Train the pooling and a linear head on `train`'s token states (held-out slice: epoch selection)."""
    from .. import training

    y = np.asarray(y_train)
    tr, ho = heldout_split(len(y), seed)
    fit_states = [train[i] for i in tr]
    flat = torch.cat(fit_states)  # (sum T, H)
    mean, std = flat.mean(0), flat.std(0).clamp(min=1e-6)
    del flat
    torch.manual_seed(seed)  # the head's initialisation; batches use their own generators
    head = TokenHead(name, mean, std, int(y.max()) + 1)
    held = [train[i] for i in ho]
    select = lambda m, epoch: float((predict(m, held).argmax(1) == y[ho]).mean())  # noqa: E731
    cfg = training.TrainConfig(epochs=hp["epochs"], batch_size=hp["batch_size"], lr=hp["lr"], seed=seed, dtype="fp32")
    t0 = time.perf_counter()
    res = training.train(head, _Rows(len(tr)), _collate(fit_states, y[tr]), lambda m, b: m(**b)[0], cfg,
                         progress=False, lengths=[len(s) for s in fit_states], on_epoch_end=select)
    proba = predict(head, evals)
    return TokenProbeResult(proba.argmax(1), proba, len(tr), len(ho), [round(x, 4) for x in res.epoch_scores],
                            res.best_epoch, res.steps, round(time.perf_counter() - t0, 2))
