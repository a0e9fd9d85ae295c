"""The pooling registry: how a (B, T, H) hidden-state tensor becomes one vector per input.

One dict, one small function per mode. The CLI's choices, the ablation grid, the
leaderboard's colours and the tests' parametrisation all read `POOLINGS`, so adding a
mode is one entry here and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .errors import BertevalError


@dataclass(frozen=True)
class Pooling:
    name: str
    fn: Callable[[torch.Tensor, torch.Tensor, torch.nn.Module], torch.Tensor]
    description: str
    needs_pooler: bool = False  # reads the checkpoint's pooler layer
    last_layer_only: bool = False  # defined on the final hidden state only
    colour: str = "#888888"  # one colour per mode, shared by every figure


def _cls(hidden: torch.Tensor, mask: torch.Tensor, encoder: torch.nn.Module) -> torch.Tensor:
    return hidden[:, 0]  # (B, H): the raw [CLS] state


def _pooler(hidden: torch.Tensor, mask: torch.Tensor, encoder: torch.nn.Module) -> torch.Tensor:
    # BERT's pooler is tanh(W h_[CLS] + b); calling the module itself keeps us identical
    # to `pooler_output` whatever the architecture's pooler does.
    return encoder.pooler(hidden)  # (B, H)


def _mean(hidden: torch.Tensor, mask: torch.Tensor, encoder: torch.nn.Module) -> torch.Tensor:
    m = mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)  # (B, H): padding contributes nothing


def _max(hidden: torch.Tensor, mask: torch.Tensor, encoder: torch.nn.Module) -> torch.Tensor:
    # Padding gets the dtype's lowest value so it can never win the max.
    filled = hidden.masked_fill(~mask.bool().unsqueeze(-1), torch.finfo(hidden.dtype).min)  # (B, T, H)
    return filled.max(1).values  # (B, H)


POOLINGS: dict[str, Pooling] = {
    p.name: p
    for p in (
        Pooling("cls", _cls, "raw [CLS] hidden state, last_hidden_state[:, 0]", colour="#1f77b4"),
        Pooling(
            "pooler",
            _pooler,
            "pooler_output = tanh(W h_[CLS] + b), the layer next-sentence pre-training trained",
            needs_pooler=True,
            last_layer_only=True,
            colour="#d62728",
        ),
        Pooling("mean", _mean, "mean of token states over the attention mask", colour="#2ca02c"),
        Pooling("max", _max, "element-wise max of token states over the attention mask", colour="#9467bd"),
    )
}


def parse(spec: str | list[str]) -> list[str]:
    """'cls,pooler' -> ['cls', 'pooler'], refusing unknown names with the valid ones."""
    names = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    unknown = [n for n in names if n not in POOLINGS]
    if unknown or not names:
        raise BertevalError(f"unknown pooling {', '.join(unknown) or '(none)'}; choose from {', '.join(POOLINGS)}")
    return list(dict.fromkeys(names))


def check_available(name: str, heads) -> None:
    """Refuse a pooling the checkpoint cannot honestly provide."""
    if not POOLINGS[name].needs_pooler:
        return
    if not heads.has_pooler:
        raise BertevalError(
            f"pooling {name!r} needs a pooler layer, and this architecture has none (e.g. DistilBERT "
            f"drops BERT's pooler). Use cls, mean or max."
        )
    if not heads.pooler_pretrained:
        raise BertevalError(
            f"pooling {name!r} refused: the checkpoint has no pooler weights, so transformers initialised "
            f"the pooler at random; a random pooler is not BERT's pooler. Use cls, mean or max."
        )


def warning(name: str, heads) -> str | None:
    """A caveat to print and record when a pooling is allowed but not what its name promises."""
    if POOLINGS[name].needs_pooler and heads.pooler_trained is False:
        return f"pooling {name!r}: this checkpoint's pooler is {heads.pooler_provenance}"
    return None


def apply(name: str, hidden: torch.Tensor, mask: torch.Tensor, encoder: torch.nn.Module) -> torch.Tensor:
    return POOLINGS[name].fn(hidden, mask, encoder)
