"""The pre-training text: English Wikipedia, minus every article the evaluation could have seen.

`<data dir>/wikipedia/enwiki-2015-prefix-*.jsonl.gz` holds 30,729 articles (one JSON line
each: id, url, title, text with one paragraph or heading per line). Before any of it trains
a model, two kinds of article are removed, because the NSP dev pairs and the SQuAD dev
questions are built from Wikipedia too:

- every article whose title is one of the SQuAD v1.1 dev titles (titles compared after
  "_" -> " " and lower-casing; 24 of the 48 are in these shards);
- every other article that contains, word for word, a sentence of the NSP dev pairs (the
  8,118 pairs of `berteval.tasks.nsp`: both A and B sentences). Sentence level, not title
  level: a quoted or shared sentence in an unrelated article is caught too. The search is
  an Aho-Corasick automaton over all dev sentences (pyahocorasick), one pass over the text.

Of the articles left, `HOLDOUT_SHARE` (1%) are held out, chosen by a seeded permutation:
held-out MLM accuracy and held-out NSP accuracy are measured on them, never trained on.
Shards are read with the standard library (gzip + json), so a GPU machine without
`datasets` reads them the same way; a line that does not parse is reported with its shard
and line number and skipped, not fatal. The record gets every shard's sha256 and the counts.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BertevalError
from ..seeds import numpy_rng

FOLDER = "wikipedia"
PATTERN = "enwiki-2015-prefix-*.jsonl.gz"
SQUAD_DEV = "squad/dev-v1.1.json"
HOLDOUT_SHARE = 0.01
# The shards as the data README lists them: a different file is named in the record, not refused.
KNOWN_SHA256 = {
    "enwiki-2015-prefix-aa.jsonl.gz": "cad8dd828307ac9b866730817c66175389f2908d518f1cf6ffbe0a10d8a9eabc",
    "enwiki-2015-prefix-ab.jsonl.gz": "d3fd2da41fe58505dc8060f59c0bfaf1cc88ccb481ce0a1f7367cab69c6a8904",
    "enwiki-2015-prefix-ac.jsonl.gz": "bb5803267b8f85e29a1f72a7e4e826e058fd8a9e9421e538cd758dd9494f4672",
    "enwiki-2015-prefix-ad.jsonl.gz": "504cd680f98ff53bbe85624db916336cf86363a196c7549151ecfa7a5d8f1878",
}


@dataclass(frozen=True)
class WikiArticle:
    title: str
    lines: tuple[str, ...]  # paragraphs and headings, in order


@dataclass
class Corpus:
    train: list[WikiArticle]
    heldout: list[WikiArticle]
    record: dict = field(default_factory=dict)  # sources, exclusions, counts, checksums


def normalise_title(title: str) -> str:
    return title.replace("_", " ").strip().lower()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def shards(data_dir: Path) -> list[Path]:
    folder = Path(data_dir) / FOLDER
    found = sorted(folder.glob(PATTERN))
    if not found:
        raise BertevalError(f"no {FOLDER}/{PATTERN} under {data_dir}: pre-training reads the Wikipedia shards "
                            f"(see shared/data/README.md). Point --data-dir at the folder that holds {FOLDER}/")
    return found


def read_articles(paths: list[Path], limit: int | None = None) -> tuple[list[WikiArticle], list[str]]:
    """Articles in shard order, and one problem line per bad JSON line (shard:line: what is wrong)."""
    out: list[WikiArticle] = []
    problems: list[str] = []
    for path in paths:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if limit is not None and len(out) >= limit:
                    return out, problems
                try:
                    row = json.loads(line)
                    title, text = row["title"], row["text"]
                    if not isinstance(title, str) or not isinstance(text, str):
                        raise TypeError("title and text must be strings")
                except (ValueError, KeyError, TypeError) as exc:
                    problems.append(f"{path.name}:{number}: {type(exc).__name__}: {exc}")
                    continue
                lines = tuple(x.strip() for x in text.split("\n") if x.strip())
                if lines:
                    out.append(WikiArticle(title, lines))
    return out, problems


def dev_articles(data_dir: Path) -> list:
    """The SQuAD v1.1 dev articles (title + paragraph contexts) as `berteval.nsp_pairs.Article`s."""
    from .. import nsp_pairs as pairs

    path = Path(data_dir) / SQUAD_DEV
    if not path.is_file():
        raise BertevalError(f"no {path}: the pre-training text is filtered against the SQuAD v1.1 dev set and the "
                            f"NSP dev pairs built from it; the data dir must hold {SQUAD_DEV}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))["data"]
        return [pairs.Article(a["title"], tuple(p["context"] for p in a["paragraphs"])) for a in data]
    except (ValueError, KeyError, TypeError) as exc:
        raise BertevalError(f"{path} is not SQuAD v1.1 JSON ({type(exc).__name__}: {exc})") from exc


def dev_sentences(articles) -> list[str]:
    """Every distinct sentence (A and B) of the NSP dev pairs, longest first."""
    from .. import nsp_pairs as pairs
    from ..tasks.nsp import PAIR_SEED

    built, _ = pairs.build_pairs(articles, PAIR_SEED)
    return sorted({s for p in built for s in (p.a, p.b)}, key=lambda s: (-len(s), s))


def contains_any(texts: list[str], needles: list[str]) -> list[int]:
    """For each text, how many distinct needles occur in it (exact substrings)."""
    import ahocorasick

    automaton = ahocorasick.Automaton()
    for k, needle in enumerate(needles):
        automaton.add_word(needle, k)
    automaton.make_automaton()
    return [len({k for _, k in automaton.iter(text)}) for text in texts]


def load(data_dir: Path | None, seed: int, limit: int | None = None, log=print) -> Corpus:
    """The filtered training articles and the held-out ones (see the module docstring)."""
    if data_dir is None:
        raise BertevalError("pre-training reads local Wikipedia shards: pass --data-dir (e.g. ../shared/data) "
                            "or set BERTEVAL_DATA")
    paths = shards(Path(data_dir))
    sources = {p.name: {"sha256": file_sha256(p), "bytes": p.stat().st_size} for p in paths}
    for name, info in sources.items():
        info["as_published"] = KNOWN_SHA256.get(name) == info["sha256"]
    articles, problems = read_articles(paths, limit)
    for line in problems[:20]:
        print(f"warning: skipped a bad line: {line}", file=sys.stderr)
    dev = dev_articles(Path(data_dir))
    titles = {normalise_title(a.title) for a in dev}
    by_title = [a for a in articles if normalise_title(a.title) in titles]
    rest = [a for a in articles if normalise_title(a.title) not in titles]
    sentences = dev_sentences(dev)
    log(f"searching {len(rest):,} articles for the {len(sentences):,} NSP dev sentences ...")
    hits = contains_any(["\n".join(a.lines) for a in rest], sentences)
    by_sentence = [a for a, n in zip(rest, hits) if n]
    kept = [a for a, n in zip(rest, hits) if not n]
    if len(kept) < 4:
        raise BertevalError(f"only {len(kept)} article(s) left after removing the dev overlap: NotNext needs two")
    rng = numpy_rng(seed, "split")
    n_hold = max(2, int(round(HOLDOUT_SHARE * len(kept))))  # NotNext pairs need two held-out documents
    hold = set(rng.permutation(len(kept))[:n_hold].tolist())
    train = [a for k, a in enumerate(kept) if k not in hold]
    heldout = [a for k, a in enumerate(kept) if k in hold]
    record = {
        "source": f"{FOLDER}/{PATTERN}",
        "shards": sources,
        "bad_lines": len(problems),
        "articles_read": len(articles),
        "limit": limit,
        "excluded_squad_dev_title": sorted(a.title for a in by_title),
        "excluded_nsp_dev_sentence": {"articles": len(by_sentence),
                                      "titles_first_50": [a.title for a in by_sentence[:50]],
                                      "dev_sentences_searched": len(sentences),
                                      "match": "exact substring of the article text (Aho-Corasick)"},
        "articles_kept": len(kept),
        "heldout": {"share": HOLDOUT_SHARE, "articles": len(heldout), "seed_stream": "split"},
        "train_articles": len(train),
        "train_text_sha256": text_sha256(train),
        "heldout_text_sha256": text_sha256(heldout),
    }
    return Corpus(train, heldout, record)


def text_sha256(articles: list[WikiArticle]) -> str:
    digest = hashlib.sha256()
    for art in articles:
        digest.update(("#" + art.title + "\n" + "\n".join(art.lines) + "\n").encode())
    return digest.hexdigest()
