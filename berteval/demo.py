"""What the app serves, per model: loaded once, shared by every request, with input limits.

The Gradio page (`app.py`) only wires components; everything it runs comes from here, so
it is testable without a browser or gradio. A model name is 'default' (the embedded
all-MiniLM-L6-v2), a local folder or a hub id; each resource is cached per name, and a
failure (hub unreachable, no committed head yet) is not cached, so a QA adapter that is
committed while the app runs is picked up on the next request. Every refusal is a
BertevalError whose message the page shows as it is.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from . import inside, models, nsp, qa, sentiment
from .errors import BertevalError

# Input limits in characters. Beyond the model's max length text is truncated (or, for a
# QA context, split into doc-stride windows, each a forward pass), so these bound the
# work one request can cause, not what the model can read.
LIMITS = {"sentence": 1000, "question": 500, "context": 10000, "model": 200}


def check_text(text: str | None, field: str, required: bool = True) -> str:
    """The stripped text, or a BertevalError saying what is wrong with it."""
    text = (text or "").strip()
    if required and not text:
        raise BertevalError(f"The {field} is empty: type one or pick an example.")
    limit = LIMITS[field]
    if len(text) > limit:
        raise BertevalError(f"The {field} has {len(text):,} characters; the limit is {limit:,}. Shorten it.")
    return text


def model_name(text: str | None) -> str:
    """A blank model box means the embedded default."""
    return check_text(text, "model", required=False) or models.DEFAULT


@dataclass
class Classifier:
    model: models.LoadedModel
    heads: dict[str, sentiment.SentimentHead]


@functools.lru_cache(maxsize=4)
def classifier(name: str = models.DEFAULT) -> Classifier:
    loaded = models.load(name)
    return Classifier(loaded, sentiment.committed_heads(loaded))


@functools.lru_cache(maxsize=4)
def qa_model(name: str = models.DEFAULT) -> qa.QAModel:
    """The default model's best committed LoRA adapter; another checkpoint's own trained QA head."""
    if name == models.DEFAULT:
        return qa.demo_model()
    loaded = models.load(name)
    return qa.QAModel(qa.head_model(loaded, require_pretrained=True), loaded.tokenizer,
                      f"pretrained QA head of {loaded.model_id}")


@functools.lru_cache(maxsize=4)
def nsp_head(name: str = models.DEFAULT) -> nsp.DemoHead:
    return nsp.load_demo_head(name)


def look_inside(name: str, text: str) -> inside.InsideReport:
    return inside.look_inside(models.load(name), text)


def warm(name: str = models.DEFAULT) -> list[str]:
    """Load everything the page uses for `name` before the first request; what could not be loaded, in words."""
    problems = []
    for what, load in (("encoder", models.load), ("SST-2 heads", classifier), ("QA model", qa_model),
                       ("NSP head", nsp_head)):
        try:
            load(name)
        except BertevalError as exc:
            problems.append(f"{what}: {exc}")
    return problems
