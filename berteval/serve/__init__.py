"""Everything the app calls, in one facade: per-model resources loaded once and shared by every
request, input limits, and one function per thing a visitor can do.

The Gradio page (`app.py`) only builds and wires components; every call it makes goes
through this module, so it is testable without a browser or gradio. A model name is
'default' (the embedded all-MiniLM-L6-v2), a local folder or a hub id; each resource is
cached per name, and a failure (hub unreachable, no committed head yet) is not cached,
so a head committed while the app runs is picked up on the next request. Every refusal
is a BertevalError whose message the page shows as it is. Committed heads and adapters
are found through the results store (`berteval.store`), like every other reader.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .. import models
from ..errors import BertevalError
from ..qa import inference as qa_inference
from . import inside, nsp, qa, reading, sentiment

DEFAULT_MODEL = models.DEFAULT
# Input limits in characters. Beyond the model's max length text is truncated (or, for a
# QA context, split into doc-stride windows, each a forward pass), so these bound the
# work one request can cause, not what the model can read.
LIMITS = {"sentence": 1000, "question": 500, "context": 10000, "model": 200}

SentimentHead = sentiment.SentimentHead
InsideReport = inside.InsideReport
Reading = reading.Reading


def check_text(text: str | None, field: str, required: bool = True) -> str:
    """The stripped text, or a BertevalError saying what is wrong with it."""
    text = (text or "").strip()
    if required and not text:
        raise BertevalError(f"The {field} is empty: type one or pick an example.")
    limit = LIMITS[field]
    if len(text) > limit:
        raise BertevalError(f"The {field} has {len(text):,} characters; the limit is {limit:,}. Shorten it.")
    return text


# The operator's allow-list of local model folders the page may load (comma-separated, exactly as a visitor
# types them). Empty by default: on a public page a visitor names offline models and hub ids only.
ALLOWED_FOLDERS_ENV = "BERTEVAL_APP_MODELS"
REFUSED_MODEL = ("This page loads the encoders in the list and Hugging Face model ids (owner/name, e.g. "
                 "bert-base-uncased); it does not read folders on the server. Pick one from the list or type a hub id.")


def offline_models() -> list[str]:
    """The models the page can use with no hub: the embedded default, the encoders derived from it whose
    records are committed (`default+nsp-pooler`, `default+mlm-nsp`, `default+random`) and the BERTs pre-trained
    here (`wiki-bert-mini`, `wiki-bert-mini-nonsp`) once their checkpoints are committed."""
    twins = [n for n in models.pretrained.PRETRAINED
             if (models.pretrained.folder(n) / models.pretrained.RECORD).is_file()]
    return [models.DEFAULT, *models.derived.offline_names(), *twins]


def allowed_folders() -> list[str]:
    import os

    return [x.strip() for x in os.environ.get(ALLOWED_FOLDERS_ENV, "").split(",") if x.strip()]


def public_model(text: str | None) -> str:
    """What a visitor typed in the Encoder box -> the name the loaders get, or a refusal that says nothing about
    the server's disk: an offline name, an operator-allowed folder (exactly as listed), or `hub:<id>` (a hub id,
    never resolved to a local folder of the same name)."""
    name = check_text(text, "model", required=False) or models.DEFAULT
    if name in offline_models() or name in allowed_folders():
        return name
    if models.is_public_hub_id(name):
        return models.HUB_ONLY + name
    raise BertevalError(REFUSED_MODEL)


def shown_name(name: str) -> str:
    """A loader name as the page shows it (`hub:bert-base-uncased` -> `bert-base-uncased`)."""
    return name[len(models.HUB_ONLY):] if name.startswith(models.HUB_ONLY) else name


def suggested_models() -> list[str]:
    """The Encoder box's choices: the offline models, and where the hub is reachable (a Space) a few SQuAD
    checkpoints whose own QA head answers in the Answer tab (`qa.HUB_SQUAD_MODELS`)."""
    return qa.suggested_models(offline_models())


def model_name(text: str | None) -> str:
    """The Encoder box's value as the loaders take it (see `public_model`); a blank box means the default."""
    return public_model(text)


@dataclass
class Classifier:
    model: models.LoadedModel
    heads: dict[str, sentiment.SentimentHead]


@functools.lru_cache(maxsize=4)
def classifier(name: str = models.DEFAULT) -> Classifier:
    loaded = models.load(name)
    return Classifier(loaded, sentiment.committed_heads(loaded))


def classify(name: str, text: str, poolings, dtype: str = "fp32") -> tuple[Classifier, dict[str, float], reading.Reading]:
    """P(positive) of one sentence under each committed head reading one of `poolings` (one forward pass, on the
    model's fp32 weights or a bf16 copy of them), and how much of the sentence that pass read."""
    clf = classifier(name)
    heads = {p: clf.heads[p] for p in poolings if p in clf.heads}
    read = reading.measure(clf.model.tokenizer, text, sentiment.max_length(heads or clf.heads))
    return clf, sentiment.p_positive(clf.model, heads, text, dtype), read


@functools.lru_cache(maxsize=4)
def qa_model(name: str = models.DEFAULT) -> qa_inference.QAModel:
    """The default model's best committed LoRA adapter; another checkpoint's own trained QA head."""
    return qa.demo_model(name)


def answer(name: str, question: str, context: str,
           dtype: str = "fp32") -> tuple[qa_inference.QAModel, qa_inference.Answer]:
    model = qa_model(name)
    return model, qa_inference.answer(model, question, context, dtype=dtype)


@functools.lru_cache(maxsize=4)
def nsp_head(name: str = models.DEFAULT) -> nsp.DemoHead:
    return nsp.load_demo_head(name)


def next_sentence(name: str, a: str, b: str) -> tuple[nsp.DemoHead, nsp.NSPPrediction]:
    head = nsp_head(name)
    return head, head.predict(a, b)


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
