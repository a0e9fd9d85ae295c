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

import dataclasses
import functools
from dataclasses import dataclass

from .. import models
from ..errors import BertevalError
from ..qa import DEFAULTS as QA_DEFAULTS
from ..qa import confidence as qa_confidence
from ..qa import inference as qa_inference
from ..qa.windows import make_windows
from . import budget, confidence, inside, nsp, qa, quick, reading, task_heads, threads, tuned

threads.serialise_fast_tokenizers()  # request threads share tokenizers (see berteval/serve/threads.py)

DEFAULT_MODEL = models.DEFAULT
# Input limits in characters: they bound the tokenizer's pass only. The model's work is bounded in tokens and
# windows (`budget`): text past a head's max length is cut, a QA context needing more than budget.MAX_WINDOWS
# windows is refused.
LIMITS = {"sentence": 1000, "question": 500, "context": 10000, "model": 200}

TaskHead = task_heads.TaskHead
PAGE_TASKS = task_heads.PAGE_TASKS
page_task = task_heads.page_task
InsideReport = inside.InsideReport
Reading = reading.Reading


def check_text(text: str | None, field: str, required: bool = True, name: str | None = None) -> str:
    """The stripped text, or a BertevalError saying what is wrong with it. `field` names the limit (LIMITS),
    `name` the input in the message where the tab has two of one kind ("sentence A")."""
    text = (text or "").strip()
    subject = f"The {field}" if name is None else name[0].upper() + name[1:]
    if required and not text:
        raise BertevalError(f"{subject} is empty: type one or pick an example.")
    limit = LIMITS[field]
    if len(text) > limit:
        raise BertevalError(f"{subject} has {len(text):,} characters; the limit is {limit:,}. Shorten it.")
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


def load_model(name: str) -> models.LoadedModel:
    """`models.load`, with the refusals a visitor can get said in a visitor's words (the library's own name the
    CLI's options: "use --model default")."""
    shown = shown_name(name)
    try:
        return models.load(name)
    except models.HubUnavailable as exc:
        raise BertevalError(f"The model {shown} cannot be loaded here: this server cannot reach the Hugging Face "
                            f"Hub and holds no copy of it. Pick one of the encoders in the list; they all work "
                            f"offline.") from exc
    except BertevalError as exc:
        if name.startswith(models.HUB_ONLY):
            raise BertevalError(f"The Hugging Face Hub has no model {shown} that this page can load: check the "
                                f"spelling (owner/name), or pick one of the encoders in the list.") from exc
        raise


@dataclass
class Classifier:
    model: models.LoadedModel
    heads: dict[str, task_heads.TaskHead]  # {pooling: head}; empty where the checkpoint's own head answers
    task: str = "sst2"
    origin: str = "committed"  # "committed" (records' heads), "quick" (a probe trained here now), "checkpoint"
    quick: quick.QuickProbe | None = None
    checkpoint: task_heads.CheckpointHead | None = None
    checkpoint_dev: quick.CheckpointDev | None = None  # the checkpoint's own head on SST-2 dev, measured here


@functools.lru_cache(maxsize=8)
def classifier(name: str = models.DEFAULT, task: str = "sst2") -> Classifier:
    """The committed heads of `task` for this model, else (SST-2) the checkpoint's own sequence-classification
    head; task_heads.NoCommittedHeads where neither exists (`classify` then trains a quick SST-2 probe)."""
    loaded = load_model(name)
    try:
        return Classifier(loaded, task_heads.committed_heads(loaded, task=task), task)
    except task_heads.NoCommittedHeads:
        own = task_heads.checkpoint_head(loaded) if task == quick.TASK else None
        if own is None:
            raise
        return Classifier(loaded, {}, task, "checkpoint", checkpoint=own)


def classify(name: str, text, poolings, dtype: str = "fp32", task: str = "sst2",
             progress: quick.Progress | None = None) -> tuple[Classifier, dict[str, float], reading.Reading]:
    """One sentence (or an (A, B) pair) under each head of `task` reading one of `poolings`, from one forward pass
    (on the model's fp32 weights or a bf16 copy of them): {pooling: P(class 1)}, or {pooling: score} for STS-B;
    where the checkpoint's own head answers, {its label: P}, and its SST-2 dev accuracy (measured on the first
    request, then kept). And how much of the input that pass read. A model with no SST-2 head at all gets a quick
    probe, trained now (`progress` hears how far it got) and kept."""
    try:
        clf = classifier(name, task)
    except task_heads.NoCommittedHeads:
        loaded = load_model(name)
        if task != quick.TASK:
            raise
        found = quick.cached(loaded) or quick.train(loaded, progress)
        clf = Classifier(loaded, found.heads, task, "quick", quick=found)
    if clf.checkpoint is not None:
        dev = quick.checkpoint_cached(clf.model) or quick.score_checkpoint(clf.model, clf.checkpoint, progress)
        clf = dataclasses.replace(clf, checkpoint_dev=dev)
        read = reading.measure(clf.model.tokenizer, text, task_heads.CHECKPOINT_MAX_LENGTH)
        return clf, task_heads.checkpoint_probabilities(clf.model, clf.checkpoint, text), read
    heads = {p: clf.heads[p] for p in poolings if p in clf.heads}
    read = reading.measure(clf.model.tokenizer, text, task_heads.max_length(heads or clf.heads))
    return clf, task_heads.outputs(clf.model, heads, text, dtype), read


def best_measured(task: str) -> task_heads.BestMeasured | None:
    """The best head the committed records measure for `task`, read once per version of its records file."""
    from ..store import Store

    path = Store().records_path(task)
    return _best_measured(task, path.stat().st_mtime_ns if path.is_file() else 0)


@functools.lru_cache(maxsize=16)
def _best_measured(task: str, version: int) -> task_heads.BestMeasured | None:
    return task_heads.best_measured(task)


def best_beating(task: str, pooling: str) -> tuple[str, task_heads.TaskHead] | None:
    """The best committed probe of `task` reading `pooling` on any offline encoder that beats the majority class
    or chance: (the Encoder box's name for that encoder, its head), or None; read once per records version."""
    from ..store import Store

    path = Store().records_path(task)
    return _best_beating(task, pooling, path.stat().st_mtime_ns if path.is_file() else 0)


@functools.lru_cache(maxsize=64)
def _best_beating(task: str, pooling: str, version: int):
    found = task_heads.best_beating(task, pooling)
    if found is None:
        return None
    model_id, head = found
    default_id = models.loading.DEFAULT_MODEL_ID
    name = (models.DEFAULT + model_id[len(default_id):] if model_id.startswith(default_id)
            else model_id.split("/", 1)[-1])  # berteval/wiki-bert-mini -> wiki-bert-mini
    return (name, head) if name in offline_models() else None


def served_head(task: str, probe: task_heads.TaskHead | None) -> task_heads.TaskHead | None:
    """The head that answers `task` on `probe`'s reading: the best committed fine-tune adapter reading the same
    vector on an offline encoder where its dev figure is above the probe's, else the probe (`tuned.served`)."""
    if probe is None or probe.run_id is None:  # a quick probe or a checkpoint's head: no committed record
        return probe
    from ..store import Store

    path = Store().records_path(task)
    found = _tuned(task, probe.pooling, path.stat().st_mtime_ns if path.is_file() else 0)
    return tuned.served(probe, found)


@functools.lru_cache(maxsize=64)
def _tuned(task: str, pooling: str, version: int) -> task_heads.TaskHead | None:
    return tuned.committed(task, pooling, [*offline_models(), *allowed_folders()])  # what the page may load


def served_output(head: task_heads.TaskHead, text, dtype: str = "fp32") -> float:
    """A fine-tune adapter's P(class 1) or score for one input (a probe's comes from `classify`)."""
    return tuned.output(head, text, dtype)


@functools.lru_cache(maxsize=4)
def qa_model(name: str = models.DEFAULT) -> qa_inference.QAModel:
    """The default model's best committed LoRA adapter; another checkpoint's own trained QA head."""
    if name != models.DEFAULT:
        load_model(name)
    return qa.demo_model(name)


def answer(name: str, question: str, context: str,
           dtype: str = "fp32") -> tuple[qa_inference.QAModel, qa_inference.Answer]:
    """The n-best answers; a context of more than budget.MAX_WINDOWS windows is refused before the model runs,
    and one of more than budget.LIGHT_WINDOWS runs in the heavy lane (a short one never waits for it)."""
    model = qa_model(name)
    settings = qa_inference.fitted(QA_DEFAULTS, model.model)
    windows = make_windows(model.tokenizer, [question], [context], max_length=settings.max_length,
                           doc_stride=settings.doc_stride)  # tokenizing only: milliseconds
    n_tokens = len({o for offsets in windows.offsets for o in offsets if o is not None})  # context tokens, once each
    n_windows = len(windows)
    budget.check_windows(n_windows, n_tokens, settings.max_length)
    return model, budget.run(n_windows, qa_inference.answer, model, question, context, settings, dtype=dtype)


@dataclass
class Confidence:
    """Is the answer in this text at all: the best span's score against the [CLS] no-answer score, and the
    served head's calibrated threshold on their difference (None: this head was not calibrated here)."""

    best: float  # the best span's start + end logit
    null: float  # the [CLS] start + end logit (the lowest over the windows)
    calibration: dict | None

    @property
    def margin(self) -> float:
        return self.best - self.null

    @property
    def in_text(self) -> bool | None:
        return qa_confidence.verdict(self.calibration, self.best, self.null)


def confidence_of(model: qa_inference.QAModel, ans: qa_inference.Answer) -> Confidence | None:
    if not ans.nbest or ans.null_score is None:
        return None
    return Confidence(float(ans.nbest[0].score), float(ans.null_score), confidence.load(model.run_id))


@functools.lru_cache(maxsize=8)
def nsp_head(name: str = models.DEFAULT) -> nsp.DemoHead:
    load_model(name)
    return nsp.load_demo_head(name)


def next_sentence(name: str, a: str, b: str) -> tuple[nsp.DemoHead, nsp.NSPPrediction]:
    head = nsp_head(name)
    return head, head.predict(a, b)


@dataclass
class NSPAnswer:
    """One encoder's answer to a pair, for the side-by-side view: its head and prediction, or why it has none."""

    name: str  # as the Encoder box names it
    head: nsp.DemoHead | None
    prediction: nsp.NSPPrediction | None
    missing: str = ""


def next_sentence_everywhere(name: str, a: str, b: str) -> list[NSPAnswer]:
    """The chosen encoder's answer first, then every offline encoder's, for the same pair."""
    out = []
    for n in dict.fromkeys([name, *offline_models()]):
        try:
            head = nsp_head(n)
            out.append(NSPAnswer(shown_name(n), head, head.predict(a, b)))
        except BertevalError as exc:
            out.append(NSPAnswer(shown_name(n), None, None, str(exc)))
    return out


@functools.lru_cache(maxsize=4)
def mlm_model(name: str):
    """The checkpoint's masked-LM model, or why it has none (a string)."""
    return inside.mlm_model(name, load_model(name))


def look_inside(name: str, text: str) -> inside.InsideReport:
    loaded = load_model(name)
    try:
        qa_head = qa_model(name)
    except BertevalError as exc:
        qa_head = str(exc)
    try:
        mlm = mlm_model(name)
    except BertevalError:  # a load that failed (not cached: the next request tries again)
        mlm = "its masked-LM head could not be loaded here just now"
    return inside.look_inside(loaded, text, qa=qa_head, mlm=mlm)


def _warm_tuned(name: str) -> None:
    """Load the fine-tune adapters that answer the pair tasks on the page's default reading, so the first pair a
    visitor classifies does not wait for one (a task without committed heads for `name` has none to load)."""
    for task in (t.name for t in PAGE_TASKS.values() if t.pair):
        try:
            head = served_head(task, classifier(name, task).heads.get("mean"))
        except task_heads.NoCommittedHeads:
            continue
        if head is not None and head.adapter:
            tuned.load(head)


def warm(name: str = models.DEFAULT) -> list[str]:
    """Load everything the page uses for `name` before the first request; what could not be loaded, in words."""
    problems = []
    for what, load in (("encoder", load_model), ("SST-2 heads", classifier), ("QA model", qa_model),
                       ("NSP head", nsp_head), ("fine-tuned pair heads", _warm_tuned)):
        try:
            load(name)
        except BertevalError as exc:
            problems.append(f"{what}: {exc}")
    return problems
