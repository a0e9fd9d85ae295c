"""The text a derivation trains on: the Wikipedia paragraphs of the SQuAD v1.1 train subset.

Only `<data dir>/squad/train-subset.json` (17 articles) is read for training, through
`datasets` as the SQuAD task reads it. No text of the official dev file trains anything:
the NSP task's dev pairs are built from it. Where the dev file is present it is read only
to prove that: a training article or paragraph that also occurs in dev is refused.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from .. import nsp_pairs as pairs
from ..errors import BertevalError

TRAIN_FILE = "squad/train-subset.json"
DEV_FILE = "squad/dev-v1.1.json"


@dataclass(frozen=True)
class TrainingText:
    articles: list  # pairs.Article, in file order
    source: str  # the file, relative to the data dir
    sha256: str  # over titles and paragraphs, in order
    dev_checked: bool  # the dev file was present and shares no article or paragraph

    def stats(self) -> dict:
        return {"source": self.source, "articles": len(self.articles),
                "paragraphs": sum(len(a.paragraphs) for a in self.articles), "text_sha256": self.sha256,
                "dev_overlap_checked": self.dev_checked}


def _articles(path: Path) -> list:
    import datasets

    from .. import config

    # field="data": the official files nest articles under "data"; one row per article.
    ds = datasets.load_dataset("json", data_files={"train": str(path)}, field="data",
                               cache_dir=str(config.cache_dir() / "datasets"))
    return pairs.articles_from_rows(ds["train"])


def text_sha256(articles) -> str:
    digest = hashlib.sha256()
    for art in articles:
        digest.update(("#" + art.title + "\n").encode())
        for para in art.paragraphs:
            digest.update((para + "\n").encode())
    return digest.hexdigest()


def load(data_dir: Path | None) -> TrainingText:
    if data_dir is None:
        raise BertevalError(f"a derivation trains on {TRAIN_FILE} of a local data dir: pass --data-dir "
                            f"(e.g. ../shared/data) or set BERTEVAL_DATA")
    train = Path(data_dir) / TRAIN_FILE
    if not train.is_file():
        raise BertevalError(f"no {train}: a derivation trains on the SQuAD v1.1 train subset (official JSON). "
                            f"Point --data-dir at the folder that holds squad/")
    articles = _articles(train)
    if len(articles) < 2:
        raise BertevalError(f"{train} holds {len(articles)} article(s): NotNext segments need at least two")
    dev = Path(data_dir) / DEV_FILE
    if dev.is_file():
        dev_articles = _articles(dev)
        titles = {a.title for a in dev_articles}
        paragraphs = {p for a in dev_articles for p in a.paragraphs}
        shared = [a.title for a in articles if a.title in titles or paragraphs.intersection(a.paragraphs)]
        if shared:
            raise BertevalError(f"{train} shares text with {DEV_FILE} ({', '.join(shared)}): dev text must never "
                                f"train an encoder (the NSP dev pairs come from it)")
    return TrainingText(articles, TRAIN_FILE, text_sha256(articles), dev.is_file())


def documents(articles, tokenizer) -> list[list[list[int]]]:
    """One document per article: its paragraphs' pysbd sentences in order, as WordPiece ids."""
    out = []
    for art in articles:
        sentences = [s for para in art.paragraphs for s in pairs.split_sentences(para)]
        ids = tokenizer(sentences, add_special_tokens=False)["input_ids"] if sentences else []
        out.append([list(x) for x in ids if x])
    return out

