"""A pooled classifier's LoRA adapter on disk: written by `--regime finetune-lora`, read by the app.

A fine-tune that moves every weight of the encoder (`--regime finetune`) keeps nothing: 90 MB of
MiniLM weights per head are too large to commit. LoRA moves a few low-rank matrices beside the
frozen encoder's linear layers; with the pooled head (`PooledClassifier.classifier`) they are one
folder of about 2.7 MiB (peft's adapter files plus `berteval_pooled.json`, what it was trained
from and what it reads), so the best pair-task heads can be committed and served like the SQuAD
adapters (`berteval.qa.inference.save_adapter`). Loading rebuilds the classifier on the base
encoder it names (refused on another revision) and merges the adapter into its weights.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import BertevalError

INFO = "berteval_pooled.json"  # beside peft's files: base model, task, pooling, labels
# Every linear layer of every encoder block (attention q/k/v/output, the feed-forward pair), and the pooler's
# dense layer, which a head reading `pooler` trains in the full fine-tune too (it gets no gradient otherwise).
TARGETS = (r".*encoder\.layer\.\d+\.(attention\.self\.(query|key|value)|attention\.output\.dense|"
           r"intermediate\.dense|output\.dense)|.*pooler\.dense")
# r=16 as the committed SQuAD adapters (`berteval.regimes.tuning.LORA`); no LoRA dropout (it doubled step time on
# CPU there); the head itself is trained whole and saved with the adapter (peft's modules_to_save).
LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0, "target_modules": TARGETS, "modules_to_save": ["classifier"]}


def wrap(model):
    """`model` (a PooledClassifier) with LoRA adapters: only they and the head train."""
    from peft import LoraConfig, get_peft_model

    return get_peft_model(model, LoraConfig(**LORA))


def save(trained, folder: Path, info: dict) -> None:
    """The adapter, the head and `info` as one folder, written whole or not at all."""
    from ..models.base import save_peft
    from ..store import is_writer, write_atomic, write_folder_atomic

    if not is_writer():
        return

    def fill(stage: Path) -> None:
        save_peft(trained, stage, info["base_model"])
        write_atomic(stage / INFO, json.dumps(info, indent=1, sort_keys=True).encode("utf-8"))

    write_folder_atomic(Path(folder), fill)


@dataclass
class PooledAdapter:
    """A loaded adapter: the merged classifier, the encoder it came from, and what its info file says."""

    model: object  # PooledClassifier, LoRA merged into its encoder, in eval mode
    loaded: object  # models.LoadedModel of the base encoder (its tokenizer reads the input)
    info: dict


def read_info(folder: Path) -> dict:
    path = Path(folder) / INFO
    if not path.is_file():
        raise BertevalError(f"{folder} is not a berteval pooled adapter (no {INFO})")
    return json.loads(path.read_text())


def load(folder: Path) -> PooledAdapter:
    """The classifier an adapter folder describes, on the base encoder it was trained from."""
    import copy

    from peft import PeftModel

    from .. import models
    from .classifier import PooledClassifier

    info = read_info(folder)
    loaded = models.load(info["base_model_arg"])
    if loaded.revision != info["base_revision"]:
        raise BertevalError(f"adapter {folder} was trained on {info['base_revision']}, not {loaded.revision}")
    base = PooledClassifier(copy.deepcopy(loaded.encoder), info["pooling"], int(info["n_labels"]),
                            regression=bool(info["regression"]))
    model = PeftModel.from_pretrained(base, str(folder)).merge_and_unload()
    model.eval()
    return PooledAdapter(model, loaded, info)
