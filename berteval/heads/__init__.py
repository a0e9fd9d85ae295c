"""Heads: what reads the encoder's output and makes a prediction.

- `linear`: the frozen probe, a logistic regression on one pooled vector, saved as one
  affine map (what the app applies live);
- `classifier`: encoder + pooling + dropout + Linear, trained end to end (fine-tune);
- `nsp`: a checkpoint's own next-sentence head, required to be real, scored as is;
- `attention`: the parameters of the `attention` pooling (a learned query over tokens);
- `tokens`: a probe head on token states held in memory (a trained pooling + Linear).
Span heads (two logits per token) live with the rest of span QA in `berteval.qa`.
"""
