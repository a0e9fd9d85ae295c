"""The pooling registry: how an encoder's hidden states become one vector per input.

One dict, one entry per mode, each saying what it reads, how wide its output is and
how to compute it. The CLI's choices, the regimes' grids, the feature cache, the
fine-tune head's width, the leaderboard's order and the tests all read `POOLINGS`, so
adding a mode is one entry here and nothing else. The module imports no torch at
import time (the functions use tensor methods, and import torch only when they run),
so listing names (`python -m berteval ls`) stays light.

Most poolings are fixed functions of the hidden states, so a frozen encoder's pooled
vectors can be cached once (`berteval.features`). A pooling with parameters of its own
(`attention`) says how to build them (`build(hidden_size) -> torch.nn.Module`): the
fine-tune head trains them with the encoder, and the probe trains them on token states
held in memory (`berteval.heads.tokens`); it is never cached as a fixed vector. Its
parameters live beside the registry (`pooling.attention`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..errors import BertevalError


@dataclass
class PoolInput:
    """What a pooling may read for one padded batch."""

    hidden: Any  # (B, T, H): the states of the requested layer
    mask: Any  # (B, T): 1 on real tokens, 0 on padding
    encoder: Any  # the base model (its pooler, its config)
    states: tuple | None = None  # every hidden state (embeddings first), when a pooling needs them
    module: Any = None  # the pooling's own trained parameters (a Pooling with `build`), else None


@dataclass(frozen=True)
class Pooling:
    name: str
    fn: Callable[[PoolInput], Any]  # PoolInput -> (B, width)
    description: str
    width_factor: int = 1  # output width = width_factor x hidden size
    needs_pooler: bool = False  # reads the checkpoint's pooler layer
    last_layer_only: bool = False  # defined on the final hidden state (or fixed layers) only
    needs_all_states: bool = False  # reads several layers: the encoder must return every hidden state
    default: bool = True  # part of the grid when --pooling is not given
    build: Callable[[int], Any] | None = None  # hidden size -> torch.nn.Module of the pooling's own parameters
    # Reads a pair's two texts encoded apart (a bi-encoder), not BERT's one pair input: `berteval.features`
    # encodes A and B as single texts with `of` pooling and combines the two vectors with `fn`.
    separate: bool = False
    of: str = ""

    @property
    def trained(self) -> bool:
        """Has parameters of its own: trained with a head, never a fixed (cacheable) vector."""
        return self.build is not None

    def width(self, hidden_size: int) -> int:
        return self.width_factor * int(hidden_size)


def _cls(x: PoolInput):
    return x.hidden[:, 0]  # (B, H): the raw [CLS] state


def _pooler(x: PoolInput):
    # BERT's pooler is tanh(W h_[CLS] + b); calling the module itself keeps us identical
    # to `pooler_output` whatever the architecture's pooler does.
    return x.encoder.pooler(x.hidden)  # (B, H)


def masked_mean(hidden, mask):
    m = mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)  # (B, H): padding contributes nothing


def _mean(x: PoolInput):
    return masked_mean(x.hidden, x.mask)


def _max(x: PoolInput):
    import torch

    # Padding gets the dtype's lowest value so it can never win the max.
    filled = x.hidden.masked_fill(~x.mask.bool().unsqueeze(-1), torch.finfo(x.hidden.dtype).min)  # (B, T, H)
    return filled.max(1).values  # (B, H)


# Which hidden state "first" means in first-last-avg: index 1, the output of the first transformer
# layer. BERT-flow (Li et al. 2020) and SimCSE (Gao et al. 2021) average the first and the last
# *layers*; index 0 is the embedding layer's output, context-free word vectors plus positions that no
# attention has mixed yet, which is a different baseline (a bag of words).
FIRST_LAYER = 1


def _first_last_avg(x: PoolInput):
    first, last = x.states[FIRST_LAYER], x.states[-1]  # (B, T, H) each
    return (masked_mean(first, x.mask) + masked_mean(last, x.mask)) / 2  # (B, H)


def _cls_mean(x: PoolInput):
    import torch

    return torch.cat([_cls(x), _mean(x)], dim=-1)  # (B, 2H): [CLS] state first, then the mean


def combine_uv(u, v):
    """Sentence-BERT's classification input (Reimers & Gurevych 2019, Section 3): (u, v, |u - v|)."""
    import numpy as np

    return np.concatenate([u, v, np.abs(u - v)], axis=1)  # (N, 3H)


def _separate(x: PoolInput):
    raise BertevalError("a bi-encoder pooling reads the pair's texts encoded apart: berteval.features builds it")


def _attention(x: PoolInput):
    return x.module(x.hidden, x.mask)  # (B, H): the token states weighted by the learned query's scores


def _build_attention(hidden_size: int):
    from .attention import AttentionPooling  # torch: only when a head is built

    return AttentionPooling(hidden_size)


POOLINGS: dict[str, Pooling] = {
    p.name: p
    for p in (
        Pooling("cls", _cls, "raw [CLS] hidden state, last_hidden_state[:, 0]"),
        Pooling("pooler", _pooler,
                "pooler_output = tanh(W h_[CLS] + b), the layer next-sentence pre-training trained",
                needs_pooler=True, last_layer_only=True),
        Pooling("mean", _mean, "mean of token states over the attention mask"),
        Pooling("max", _max, "element-wise max of token states over the attention mask"),
        Pooling("first-last-avg", _first_last_avg,
                "mean over tokens of the first transformer layer's states (hidden state 1) and of the last "
                "layer's, averaged (BERT-flow's and SimCSE's unsupervised baseline)",
                last_layer_only=True, needs_all_states=True, default=False),
        Pooling("cls+mean", _cls_mean, "the raw [CLS] state and the token mean, concatenated", width_factor=2,
                default=False),
        Pooling("bi-mean", _separate,
                "sentence pairs encoded apart (a bi-encoder): u = mean of A's token states, v = B's, the head reads "
                "(u, v, |u - v|) (Sentence-BERT's classification input)",
                width_factor=3, default=False, separate=True, of="mean"),
        Pooling("attention", _attention,
                "a learned query scores every token (dot product, softmax over the attention mask); the head "
                "reads the weighted sum of token states (starts as the mean: the query starts at zero)",
                default=False, build=_build_attention),
    )
}


def names() -> list[str]:
    """Every registered pooling, in registry order (the order every figure and table uses)."""
    return list(POOLINGS)


def default_names() -> list[str]:
    return [n for n, p in POOLINGS.items() if p.default]


def parse(spec: str | list[str] | None) -> list[str]:
    """'cls,pooler' -> ['cls', 'pooler'], refusing unknown names with the valid ones; None -> the defaults."""
    if spec is None:
        return default_names()
    names_ = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    unknown = [n for n in names_ if n not in POOLINGS]
    if unknown or not names_:
        raise BertevalError(f"unknown pooling {', '.join(unknown) or '(none)'}; choose from {', '.join(POOLINGS)}")
    return list(dict.fromkeys(names_))


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


def apply(name: str, hidden, mask, encoder, states: tuple | None = None, module=None):
    """(B, width) vectors of pooling `name` from a layer's (B, T, H) states (and its trained `module`, for a
    pooling with parameters)."""
    spec = POOLINGS[name]
    if spec.trained and module is None:
        raise BertevalError(f"pooling {name!r} has parameters of its own: it is trained with a head (fine-tune, or "
                            f"the probe on token states), not computed as a fixed vector")
    return spec.fn(PoolInput(hidden, mask, encoder, states, module))
