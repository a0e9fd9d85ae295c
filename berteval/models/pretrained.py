"""Models pre-trained here from scratch (`berteval pretrain <name>`): the one registry of their names.

Each is a full, standard checkpoint folder under `<results root>/encoders/<name>/` (config,
tokenizer, sharded safetensors, model card, `derivation.json`): any transformers user loads
it with the Auto classes; berteval resolves the name offline. Light: no torch here.

The twins differ only in the NSP loss (BERT's Table 5 ablation, "No NSP"): same text,
vocabulary, examples, order, initialisation and steps. In `wiki-bert-mini-nonsp` the pooler
and NSP head are saved exactly as initialised; its record says so, and berteval treats that
NSP head as absent (the pretrained NSP regime refuses it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

RECORD = "derivation.json"
ID_PREFIX = "berteval/"  # model ids in records: berteval/wiki-bert-mini


@dataclass(frozen=True)
class Pretrained:
    name: str
    nsp: bool  # trained with the next-sentence loss (its pooler and NSP head are trained)
    summary: str

    @property
    def model_id(self) -> str:
        return ID_PREFIX + self.name


PRETRAINED: dict[str, Pretrained] = {
    "wiki-bert-mini": Pretrained(
        "wiki-bert-mini", True,
        "BERT-Mini (4 layers, hidden 256) pre-trained here from scratch on Wikipedia with masked LM + "
        "next-sentence prediction: its pooler and NSP head are trained"),
    "wiki-bert-mini-nonsp": Pretrained(
        "wiki-bert-mini-nonsp", False,
        "the same BERT-Mini, same text, examples, order and initialisation, masked LM only: its pooler and "
        "NSP head are exactly as initialised (the control)"),
}


def folder(name: str, results_root: Path | None = None) -> Path:
    from .. import config

    return config.results_root(results_root) / "encoders" / name
