"""Next-sentence pairs from real Wikipedia paragraphs (the SQuAD v1.1 contexts).

BERT's paper reports 97-98% next-sentence accuracy on pairs it never published; this
module makes a fixed, documented pair set instead, so NSP heads and pooled probes can
be scored on the same examples by anyone. The construction:

1. Articles are SQuAD v1.1 articles (title + paragraph contexts): the official dev file
   for evaluation, the train subset for training probes, so no article is on both sides.
2. Each paragraph is split into sentences by pysbd (a rule-based sentence boundary
   detector that knows abbreviations, decimals and initials), never across paragraphs.
3. A sentence with fewer than `MIN_WORDS` words is not a sentence for NSP ("[citation
   needed]", ":12", "Tesla stated,"); words are whitespace tokens holding a letter,
   not counting [bracketed] editorial notes. Such a sentence is never used, and the
   pairs it would sit in are dropped rather than bridged (A and B stay truly adjacent).
4. A candidate is a sentence A whose next sentence in the same paragraph is kept. A
   seeded permutation labels exactly half of the candidates IsNext (B = the next
   sentence) and half NotNext (B = a sentence drawn uniformly from the *other* articles
   of the same file). NotNext partners are drawn from the sentences that could be an
   IsNext partner (those with a kept predecessor), so neither A nor B alone gives the
   label away by its position in a paragraph. A partner is never A itself or its true
   next sentence (checked on the text, too).

Labels follow BERT's order: 0 = IsNext, 1 = NotNext. The same seed and the same
articles give the same pairs, in document order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .seeds import numpy_rng

IS_NEXT, NOT_NEXT = 0, 1  # BERT's order: seq_relationship index 0 = "B follows A"
LABELS = ("IsNext", "NotNext")
MIN_WORDS = 4
_BRACKETED = re.compile(r"\[[^\]]*\]")
_HAS_LETTER = re.compile(r"[^\W\d_]")


@dataclass(frozen=True)
class Article:
    title: str
    paragraphs: tuple[str, ...]


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    label: int  # IS_NEXT or NOT_NEXT
    id: str  # "<article>/<paragraph>/<sentence index of A>"
    b_from: str  # where B was taken from: "<article>/<paragraph>/<sentence>"


@dataclass(frozen=True)
class PairStats:
    articles: int
    paragraphs: int
    sentences: int  # as split by pysbd
    too_short: int  # sentences skipped by the MIN_WORDS rule
    candidates: int  # sentences A with a kept next sentence in their paragraph
    pairs: int  # candidates used: the even part, half of each label

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@lru_cache(maxsize=1)
def _segmenter():
    import pysbd  # imported here so modules that never build pairs do not pay for it

    return pysbd.Segmenter(language="en", clean=False)


def split_sentences(paragraph: str) -> list[str]:
    """pysbd's sentences of one paragraph, stripped of surrounding whitespace."""
    return [s.strip() for s in _segmenter().segment(paragraph) if s.strip()]


def is_sentence(text: str) -> bool:
    """At least MIN_WORDS words with a letter, editorial [notes] not counted."""
    words = _BRACKETED.sub(" ", text).split()
    return sum(1 for w in words if _HAS_LETTER.search(w)) >= MIN_WORDS


def build_pairs(articles: list[Article], seed: int) -> tuple[list[Pair], PairStats]:
    """The NSP pairs of one file's articles; see the module docstring for the rules."""
    if len(articles) < 2:
        raise ValueError("NotNext partners come from another article: need at least two articles")
    # Every sentence as (article, paragraph, index, text, kept), in document order.
    sentences: list[tuple[int, int, int, str]] = []
    kept_flags: list[bool] = []
    candidates: list[int] = []  # positions in `sentences` of an A whose next is kept
    partners: list[int] = []  # positions of sentences with a kept predecessor (possible B)
    n_paragraphs = 0
    for ai, art in enumerate(articles):
        for pi, text in enumerate(art.paragraphs):
            n_paragraphs += 1
            for si, sent in enumerate(split_sentences(text)):
                pos = len(sentences)
                sentences.append((ai, pi, si, sent))
                kept_flags.append(is_sentence(sent))
                if si > 0 and kept_flags[pos] and kept_flags[pos - 1]:
                    candidates.append(pos - 1)
                    partners.append(pos)

    rng = numpy_rng(seed, "pairs")
    n_use = len(candidates) - len(candidates) % 2  # exactly half of each label
    order = rng.permutation(len(candidates))[:n_use]
    not_next = set(order[n_use // 2:].tolist())
    partner_art = np.array([sentences[p][0] for p in partners])
    pools: dict[int, np.ndarray] = {}  # article -> partners from every other article
    where = lambda pos: "/".join(str(x) for x in sentences[pos][:3])  # noqa: E731

    pairs: list[Pair] = []
    for k in sorted(order.tolist()):  # document order
        a_pos = candidates[k]
        ai, _, _, a_text = sentences[a_pos]
        next_text = sentences[a_pos + 1][3]
        if k not in not_next:
            pairs.append(Pair(a_text, next_text, IS_NEXT, where(a_pos), where(a_pos + 1)))
            continue
        pool = pools.setdefault(ai, np.flatnonzero(partner_art != ai))
        for _ in range(1000 if len(pool) else 0):
            b_pos = partners[int(pool[rng.integers(len(pool))])]
            b_text = sentences[b_pos][3]
            if b_text not in (a_text, next_text):  # the same text can recur across articles
                break
        else:
            raise ValueError(f"no NotNext partner for {where(a_pos)}: the other articles have no usable sentence")
        pairs.append(Pair(a_text, b_text, NOT_NEXT, where(a_pos), where(b_pos)))

    stats = PairStats(
        articles=len(articles),
        paragraphs=n_paragraphs,
        sentences=len(sentences),
        too_short=kept_flags.count(False),
        candidates=len(candidates),
        pairs=len(pairs),
    )
    return pairs, stats


def articles_from_rows(part) -> list[Article]:
    """Articles from either layout `datasets` gives: the official nested JSON (one row per
    article, `paragraphs[].context`) or the hub's flat rows (one per question, with
    `title` and `context`), grouped by title in order with repeated contexts once."""
    if "paragraphs" in part.column_names:
        return [Article(row["title"], tuple(p["context"] for p in row["paragraphs"])) for row in part]
    grouped: dict[str, dict[str, None]] = {}
    for title, context in zip(part["title"], part["context"]):
        grouped.setdefault(title, {})[context] = None  # a dict keeps first-seen order
    return [Article(title, tuple(contexts)) for title, contexts in grouped.items()]
