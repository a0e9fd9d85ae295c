"""Heads: what reads the encoder's output and makes a prediction.

- `probe`: the frozen probe, a logistic regression on one pooled vector, saved as one
  affine map (what the app applies live); `newton_logistic` solves it exactly along the C grid;
- `classifier`: encoder + pooling + dropout + Linear, trained end to end (fine-tune);
- `nsp`: a checkpoint's own next-sentence head, required to be real, scored as is;
- `tokens`: a probe head on token states held in memory (a trained pooling + Linear).
The `attention` pooling's parameters live with the pooling registry (`berteval.pooling.attention`);
span heads (two logits per token) with the rest of span QA (`berteval.qa.heads`).
"""
