"""berteval: score BERT's heads (sentence classification, span QA, next-sentence
prediction) and the vector a classifier reads (raw [CLS], pooler_output, mean, max),
reproducibly, as typed result records.

This package never imports gradio or plotly: the app and the leaderboard sit on top
of it, so the library stays importable (and testable) without any UI stack.
"""

__version__ = "0.1.0"
