"""Derived encoders: a base model plus small committed artifacts, applied at load time.

A derived name is `<base>+<variant>` (`default+nsp-pooler`, `default+mlm-nsp`,
`default+random`; the base may also be a local folder or a hub id). `berteval derive`
(`berteval.derive`) trains or generates the variant once and writes its artifacts and a
provenance record, `derivation.json`, under `<results root>/encoders/<folder>/`; loading
rebuilds the model from the base and those artifacts, so a ~90 MB encoder costs the
repository a few MiB at most. Every artifact's sha256 is in the record and checked
before use: a missing or altered artifact is refused with the command that rebuilds it,
never silently replaced by transformers' random initialisation.

Variants (`VARIANTS`, the one registry of derived names; `berteval.derive.RECIPES`
holds how each is made):
- `nsp-pooler`: the base encoder unchanged; its pooler (dense + tanh) and an NSP head
  (`cls.seq_relationship`, Linear(hidden, 2), index 0 = IsNext) trained by next-sentence
  prediction. Artifact: those four tensors.
- `mlm-nsp`: continued pre-training with BERT's objective (masked LM + NSP); artifacts: a
  LoRA adapter on every encoder linear layer (merged into the weights at load time) and
  the pooler, NSP head and MLM head transform/bias.
- `random`: the base's architecture, config and tokenizer with seeded random weights
  (transformers' own initialisation under a fixed seed). Nothing is stored but the record:
  the weights are regenerated at load time and their content hash must equal the
  recorded one, so a change in transformers' initialisation shows instead of drifting.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import BertevalError
from .base import DEFAULT, quiet_loader

RECORD = "derivation.json"
ENCODERS = "encoders"  # the folder under the results root that holds derived encoders
# What a record names the NSP head and pooler tensors by: BertForNextSentencePrediction's keys.
POOLER_KEYS = ("bert.pooler.dense.weight", "bert.pooler.dense.bias")
NSP_KEYS = ("cls.seq_relationship.weight", "cls.seq_relationship.bias")
MLM_KEYS = ("cls.predictions.transform.dense.weight", "cls.predictions.transform.dense.bias",
            "cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.LayerNorm.bias",
            "cls.predictions.bias")
HEADS_FILE = "heads.safetensors"
ADAPTER_FILES = ("adapter_model.safetensors", "adapter_config.json")
ENCODER_SHARD = "encoder-"  # a fully continued encoder's layers: encoder-000.safetensors, ...


def _apply_heads(model, folder: Path) -> None:
    """Pooler and NSP head from `heads.safetensors` onto a *ForNextSentencePrediction model, in place."""
    import torch
    from safetensors.torch import load_file

    tensors = load_file(str(folder / HEADS_FILE))
    wanted = set(POOLER_KEYS + NSP_KEYS)
    missing = wanted - set(tensors)
    if missing:
        raise BertevalError(f"{folder / HEADS_FILE} lacks {', '.join(sorted(missing))}: rerun the derivation")
    own = model.state_dict()
    with torch.no_grad():
        for key in sorted(wanted):
            if own[key].shape != tensors[key].shape:
                raise BertevalError(f"{folder / HEADS_FILE}: {key} has shape {tuple(tensors[key].shape)}, "
                                    f"the model {tuple(own[key].shape)}: derived from another base?")
            own[key].copy_(tensors[key])


def _apply_lora_and_heads(model, folder: Path):
    """The LoRA adapter merged into the encoder's weights, then the pooler and NSP head."""
    import warnings

    from peft import PeftModel

    with warnings.catch_warnings():  # peft asks transformers a deprecated question (FutureWarning): not ours
        warnings.simplefilter("ignore", FutureWarning)
        merged = PeftModel.from_pretrained(model, str(folder)).merge_and_unload()
    _apply_heads(merged, folder)
    return merged


def _apply_continued(model, folder: Path):
    """A base continued on Wikipedia (`berteval.derive.continued`): its LoRA adapter merged, or its fully
    trained layers (encoder-*.safetensors) loaded; then the pooler and NSP head (as initialised, for the
    masked-LM-only twin: what a reader of its pooler must see)."""
    import torch
    from safetensors.torch import load_file

    if (folder / ADAPTER_FILES[1]).is_file():
        return _apply_lora_and_heads(model, folder)
    own = model.state_dict()
    with torch.no_grad():
        for shard in sorted(folder.glob(ENCODER_SHARD + "*.safetensors")):
            for key, tensor in load_file(str(shard)).items():
                if key not in own or own[key].shape != tensor.shape:
                    raise BertevalError(f"{shard}: {key} does not fit the base model: derived from another base?")
                own[key].copy_(tensor)
    _apply_heads(model, folder)
    return model


@dataclass(frozen=True)
class Variant:
    suffix: str
    summary: str  # one line: what this encoder is
    trains_nsp: bool  # the pooler and an NSP head were trained by next-sentence prediction
    artifacts: tuple[str, ...]  # committed files besides the record
    apply: Callable | None  # (nsp_model, folder) -> model with the artifacts applied; None: generated


VARIANTS: dict[str, Variant] = {
    "nsp-pooler": Variant(
        "nsp-pooler",
        "the base encoder frozen; pooler (dense + tanh) and NSP head trained by next-sentence prediction",
        True, (HEADS_FILE,), _apply_heads),
    "mlm-nsp": Variant(
        "mlm-nsp",
        "continued pre-training with BERT's objective (masked LM + NSP): LoRA on every encoder linear layer, "
        "pooler, NSP head and MLM head trained; built on the 17 articles of the SQuAD train subset (the pair "
        "built on the twins' Wikipedia text is mlm-nsp-wiki / mlm-wiki)",
        True, (*ADAPTER_FILES, HEADS_FILE), _apply_lora_and_heads),
    # Issue 43's pair: the same start, examples, order and steps on the twins' Wikipedia text (the base's own
    # vocabulary); the first trains the pooler and NSP head with masked LM, the second masked LM alone.
    "mlm-nsp-wiki": Variant(
        "mlm-nsp-wiki",
        "continued pre-training on Wikipedia (the twins' text, cue-free NSP pairs) with BERT's objective (masked "
        "LM + NSP): pooler, NSP head and MLM head trained",
        True, (HEADS_FILE,), _apply_continued),
    "mlm-wiki": Variant(
        "mlm-wiki",
        "continued pre-training on Wikipedia (the twins' text) with masked LM alone, from the same start, "
        "examples and steps as +mlm-nsp-wiki: pooler and NSP head left as initialised",
        False, (HEADS_FILE,), _apply_continued),
    "random": Variant(
        "random",
        "the base's architecture and tokenizer with seeded random weights (transformers' init): the floor",
        False, (), None),
}


@dataclass(frozen=True)
class DerivedName:
    name: str  # as given, e.g. "default+nsp-pooler"
    base: str  # "default", a local folder or a hub id
    variant: Variant

    @property
    def folder_name(self) -> str:
        """The artifact folder's name: `default+nsp-pooler`, `<folder name>+...`, `owner--name+...`."""
        if self.base == DEFAULT:
            stem = DEFAULT
        elif Path(self.base).expanduser().is_dir():
            stem = Path(self.base).expanduser().resolve().name
        else:
            stem = self.base.replace("/", "--")
        return f"{stem}+{self.variant.suffix}"

    def folder(self, root: Path | None = None) -> Path:
        return encoders_root(root) / self.folder_name


def encoders_root(results_root: Path | None = None) -> Path:
    """`<results root>/encoders`: committed derived encoders live beside the records that use them."""
    from .. import config

    return Path(results_root if results_root is not None else config.results_root()) / ENCODERS


def parse(name: str) -> DerivedName | None:
    """A derived name's base and variant; None for anything else (default, folder, hub id).
    An existing folder always means that folder, even with a '+' in its name."""
    match = re.fullmatch(r"(.+)\+([A-Za-z0-9-]+)", name)
    if match is None or Path(name).expanduser().is_dir():
        return None
    base, suffix = match.groups()
    if suffix not in VARIANTS:
        raise BertevalError(f"unknown derived encoder {name!r}: the part after '+' names the variant, one of "
                            f"{', '.join(VARIANTS)} (e.g. default+nsp-pooler)")
    return DerivedName(name, base, VARIANTS[suffix])


def offline_names(results_root: Path | None = None) -> list[str]:
    """Derived encoders of the embedded default with a record here, in registry order (for model lists)."""
    return [f"default+{s}" for s in VARIANTS if (encoders_root(results_root) / f"default+{s}" / RECORD).is_file()]


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def state_sha256(state: dict) -> str:
    """sha256 over a state dict's names, dtypes, shapes and bytes, in name order."""
    digest = hashlib.sha256()
    for key in sorted(state):
        tensor = state[key].detach().cpu().contiguous()
        digest.update(f"{key}|{tensor.dtype}|{tuple(tensor.shape)}\n".encode())
        digest.update(tensor.numpy().tobytes())
    return digest.hexdigest()


def artifacts_sha256(files: dict[str, dict]) -> str:
    """One hash over the artifact files' own hashes: what a derived revision names."""
    return hashlib.sha256("".join(f"{n}:{files[n]['sha256']}\n" for n in sorted(files)).encode()).hexdigest()


def _rebuild_hint(spec: DerivedName) -> str:
    base = "" if spec.base == "default" else " (with the same base)"
    return (f"Run: python -m berteval.derive {spec.name} --data-dir ../shared/data{base}; it writes "
            f"{spec.folder_name}/ under the results folder's {ENCODERS}/ (BERTEVAL_RESULTS or leaderboard/results)")


def verified_record(spec: DerivedName) -> tuple[Path, dict]:
    """The derivation record, after checking that every artifact it lists is there, unaltered."""
    folder = spec.folder()
    record_file = folder / RECORD
    if not record_file.is_file():
        raise BertevalError(f"derived encoder {spec.name!r} is not available: no {record_file}. "
                            + _rebuild_hint(spec))
    try:
        record = json.loads(record_file.read_text())
        files = record["artifacts"]["files"]
    except (ValueError, KeyError, TypeError) as exc:
        raise BertevalError(f"{record_file} is not a derivation record ({exc}). " + _rebuild_hint(spec)) from exc
    if record.get("variant") != spec.variant.suffix:
        raise BertevalError(f"{record_file} records variant {record.get('variant')!r}, not {spec.variant.suffix!r}")
    for fname in spec.variant.artifacts:
        if fname not in files:
            raise BertevalError(f"{record_file} lists no {fname}: the record is from another version. "
                                + _rebuild_hint(spec))
    for fname, meta in files.items():
        path = folder / fname
        if not path.is_file():
            raise BertevalError(f"derived encoder {spec.name!r}: artifact {path} is missing. " + _rebuild_hint(spec))
        if file_sha256(path) != meta["sha256"]:
            raise BertevalError(f"derived encoder {spec.name!r}: {path} does not match the sha256 in its "
                                f"{RECORD} (altered, or a Git LFS pointer?). " + _rebuild_hint(spec))
    return folder, record


def revision(spec: DerivedName, base_revision: str, record: dict) -> str:
    """Base revision + what was derived: the artifacts' hash, or the generated weights' hash."""
    recorded_base = record.get("base", {}).get("revision")
    if recorded_base != base_revision:
        raise BertevalError(f"derived encoder {spec.name!r} was derived from base revision {recorded_base!r}, but "
                            f"{spec.base!r} is now {base_revision!r}. " + _rebuild_hint(spec))
    if spec.variant.apply is None:
        return f"{base_revision} +{spec.variant.suffix} weights-sha256:{record['weights_sha256'][:16]}"
    return f"{base_revision} +{spec.variant.suffix} sha256:{record['artifacts']['sha256'][:16]}"


# Every model built in this process is built under this lock (models.loading takes it too). Initialisation
# draws from torch's global generator, and transformers offers no way to hand it another: its constructors
# draw (nn.Linear's own reset) before its _init_weights, so even a private generator patched into
# transformers.initialization gives other weights than the committed ones (measured: sha256 6fa68042...
# instead of 9f712f89...). Seeding the global generator is therefore the only way to regenerate the random
# control, and two requests building models at once interleaved their draws (every cold concurrent
# default+random request failed its checksum): serialised, no build sees another's draws.
CONSTRUCTION = threading.RLock()


def random_model(config, seed: int):
    """The *ForNextSentencePrediction architecture of `config` with transformers' own
    initialisation under `seed`; the global RNG is left as it was."""
    import torch
    from transformers import AutoModelForNextSentencePrediction

    with CONSTRUCTION, torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = AutoModelForNextSentencePrediction.from_config(config)
    model.eval()
    return model


def build(spec: DerivedName, folder: Path, record: dict, base_path: str, config):
    """The *ForNextSentencePrediction model of a derived encoder (artifacts applied, eval mode)."""
    from transformers import AutoModelForNextSentencePrediction

    if spec.variant.apply is None:
        model = random_model(config, record["seed"])
        got = state_sha256(model.state_dict())
        if got != record["weights_sha256"]:
            raise BertevalError(
                f"derived encoder {spec.name!r}: the seeded initialisation no longer reproduces the recorded weights "
                f"(sha256 {got[:16]} != {record['weights_sha256'][:16]}; transformers' init changed?). Records made "
                f"with it describe other weights. " + _rebuild_hint(spec) + " with --force, then rerun its records.")
        return model
    with quiet_loader():
        model = AutoModelForNextSentencePrediction.from_pretrained(base_path, local_files_only=True)
    model = spec.variant.apply(model, folder) or model
    model.eval()
    return model


def pooler_note(spec: DerivedName, record_path: str, record: dict) -> str:
    """The pooler's provenance in words, for `HeadReport.pooler_provenance`."""
    training = record.get("training", {})
    pairs = record.get("pairs", {})
    if not spec.variant.trains_nsp and spec.variant.suffix.endswith("-wiki"):
        return _wiki_pooler_note(spec, record_path, record)
    if not spec.variant.trains_nsp:
        return (f"random: this is the seeded random control (transformers' initialisation, seed {record.get('seed')}; "
                f"record {record_path}); no weight of it was trained, the pooler included")
    if spec.variant.suffix.endswith("-wiki"):
        return _wiki_pooler_note(spec, record_path, record)
    how = ("the encoder frozen, the pooler (dense + tanh) and an NSP head trained"
           if spec.variant.suffix == "nsp-pooler"
           else "trained with the NSP head and masked LM (BERT's objective; LoRA on the encoder)")
    articles = record.get("data", {}).get("articles", "?")
    return (f"NSP-trained by berteval derive (record {record_path}): {how} by next-sentence prediction on "
            f"{pairs.get('instances', '?')} BERT-style segment pairs from {articles} "
            f"Wikipedia articles (SQuAD train subset), {training.get('steps', '?')} steps")


def _wiki_pooler_note(spec: DerivedName, record_path: str, record: dict) -> str:
    """The pooler of a base continued on Wikipedia: NSP-trained, or the base's own pooler left as it was."""
    training = record.get("training", {})
    done = (f"{training.get('steps', '?')} steps, {training.get('tokens_seen', '?')} tokens of Wikipedia "
            f"({training.get('tuning', '?')}; record {record_path})")
    if spec.variant.trains_nsp:
        return f"NSP-trained by berteval derive with masked LM (BERT's objective), cue-free pairs: {done}"
    return (f"the base's pooler, untouched: masked LM alone continued the encoder under it ({done}); no objective "
            f"trained this pooler")
