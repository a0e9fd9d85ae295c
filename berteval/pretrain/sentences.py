"""Sentences of the pre-training text: NLTK's Punkt, trained unsupervised on the text itself.

BERT's pre-training documents are lists of sentences (segments end at sentence boundaries).
The NSP pair set (`berteval.nsp_pairs`) splits with pysbd, but pysbd reads about 36 k words/s on
this CPU: 30 minutes a core for 65 M words. Punkt (Kiss & Strunk 2006, as NLTK implements
it) learns abbreviations, collocations and sentence starters from raw text, needs no
downloaded model (its parameters are trained here, from the first `TRAIN_LINES` training
lines, in a few seconds) and splits about 20x faster (measured in docs/performance.md).
Where the two disagree, it is mostly quotations ending in '."' (Punkt splits inside them,
pysbd at their end); the record holds the share of paragraphs both split identically.

What is text: BERT "extract[s] only the text passages and ignore[s] lists, tables, and
headers". The shards keep section headings as their own lines ("History.", "Early life.")
and a little markup ("width:9.9em;"): a line of fewer than `MIN_LINE_WORDS` whitespace words
is taken for one of those and dropped (the count goes in the record). Sentences of one
article run on across its paragraphs, as in BERT's input files.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

MIN_LINE_WORDS = 7
TRAIN_LINES = 100_000  # Punkt's training sample: the first lines of the training text


def is_text(line: str) -> bool:
    return len(line.split()) >= MIN_LINE_WORDS


@dataclass
class Splitter:
    tokenizer: object  # nltk PunktSentenceTokenizer
    record: dict

    def split(self, paragraph: str) -> list[str]:
        return [s.strip() for s in self.tokenizer.tokenize(paragraph) if s.strip()]


def train(lines: list[str]) -> Splitter:
    """Punkt parameters from `lines` (deterministic: the same lines give the same parameters)."""
    import nltk
    from nltk.tokenize.punkt import PunktSentenceTokenizer, PunktTrainer

    t0 = time.perf_counter()
    trainer = PunktTrainer()
    trainer.INCLUDE_ALL_COLLOCS = False
    trainer.train("\n".join(lines), finalize=True)
    params = trainer.get_params()
    digest = hashlib.sha256()
    for part in (sorted(params.abbrev_types), sorted(map(str, params.collocations)), sorted(params.sent_starters)):
        digest.update(("\n".join(part) + "\x00").encode())
    record = {"splitter": f"nltk=={nltk.__version__} Punkt, trained unsupervised on the first {len(lines):,} "
                          f"text lines of the training articles",
              "abbreviations": len(params.abbrev_types), "collocations": len(params.collocations),
              "sentence_starters": len(params.sent_starters), "parameters_sha256": digest.hexdigest(),
              "train_s": round(time.perf_counter() - t0, 2), "min_line_words": MIN_LINE_WORDS}
    return Splitter(PunktSentenceTokenizer(params), record)


def agreement_with_pysbd(splitter: Splitter, paragraphs: list[str]) -> dict:
    """Share of `paragraphs` both splitters cut identically, and each one's words per second."""
    from .. import nsp_pairs as pairs

    t0 = time.perf_counter()
    ours = [splitter.split(p) for p in paragraphs]
    t1 = time.perf_counter()
    theirs = [pairs.split_sentences(p) for p in paragraphs]
    t2 = time.perf_counter()
    words = sum(len(p.split()) for p in paragraphs)
    same = sum(a == b for a, b in zip(ours, theirs))
    return {"paragraphs": len(paragraphs), "identical_split": round(same / max(1, len(paragraphs)), 4),
            "punkt_words_per_s": round(words / max(1e-9, t1 - t0)), "pysbd_words_per_s": round(
                words / max(1e-9, t2 - t1)), "sentences_punkt": sum(map(len, ours)),
            "sentences_pysbd": sum(map(len, theirs))}
