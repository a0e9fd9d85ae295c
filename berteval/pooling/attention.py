"""Attention pooling: a learned query scores every token, and the vector is the weighted sum.

The pooling registry's `attention` entry builds this module; it has parameters, so it is
trained with a head (the fine-tune's classifier, or the probe's head on token states) and
never cached as a fixed vector. One query vector q (no key or value projections): token t
scores s_t = h_t . q / sqrt(H), the weights are a softmax of s over the real tokens (padding
gets none), and the output is sum_t a_t h_t. q starts at zero, so an untrained attention
pooling is exactly the masked mean: training moves it away from mean pooling only as far
as the labels ask.
"""

from __future__ import annotations

import math

import torch


# The query's learning rate as a multiple of the run's: it starts at zero, and at a fine-tune's encoder rate
# (1e-4, 226 steps) Adam moves each coordinate by at most ~0.02, so the fine-tuned attention pooling stayed
# the mean on every seed (0 disagreements); at 100x it can move as far as the labels ask. The fine-tune sets it
# (`lr_scale`, read by berteval.training's optimiser); the probe on token states keeps its own rate.
QUERY_LR_SCALE = 100.0


class AttentionPooling(torch.nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        self.query = torch.nn.Parameter(torch.zeros(hidden_size))  # (H,): zero = uniform weights = the mean
        self.scale = 1.0 / math.sqrt(hidden_size)

    def weights(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, T) attention weights over the real tokens; each row sums to 1."""
        scores = (hidden @ self.query.to(hidden.dtype)) * self.scale  # (B, T)
        scores = scores.float().masked_fill(~mask.bool(), float("-inf"))  # padding never gets weight
        return torch.softmax(scores, dim=-1)  # (B, T)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        a = self.weights(hidden, mask).to(hidden.dtype)  # (B, T)
        return torch.einsum("bt,bth->bh", a, hidden)  # (B, H)
