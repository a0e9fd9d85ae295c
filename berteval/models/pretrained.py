"""Models pre-trained here from scratch (`berteval pretrain <name>`): the one registry of their names.

Each is a full, standard checkpoint folder under `<results root>/encoders/<name>/` (config,
tokenizer, sharded safetensors, model card, `derivation.json`): any transformers user loads
it with the Auto classes; berteval resolves the name offline. Light: no torch here.

The twins differ only in the NSP loss (BERT's Table 5 ablation, "No NSP"): same text,
vocabulary, examples, order, initialisation and steps. In `wiki-bert-mini-nonsp` the pooler
and NSP head are saved exactly as initialised; its record says so, and berteval treats that
NSP head as absent (the pretrained NSP regime refuses it).

A snapshot (`snapshot_of`, `at_step`) is another run's weights at one step of its schedule, as the run wrote them
(`snapshot_steps` of its recipe) and a session committed them under `<results root>/pretrain-snapshots/`: the
main pair at the seed-1 pair's token budget, so the seed spread compares equal budgets. Publishing one evaluates
it as a finished run is evaluated, and its record says it stopped early.
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
    recipe: str = "gen1"  # the pre-training recipe (berteval.pretrain.command.RECIPES)
    seed: int = 0  # the pre-training seed: initialisation, examples and batch order
    twin: str = ""  # the other twin (same recipe, seed, examples and order; the other objective)
    snapshot_of: str = ""  # a model whose run's committed weights at `at_step` this one publishes (no training)
    at_step: int = 0

    @property
    def model_id(self) -> str:
        return ID_PREFIX + self.name


_G2 = ("BERT-Mini (4 layers, hidden 256), second generation: pre-trained here from scratch on Wikipedia with BERT's "
       "recipe on NSP pairs with no surface cue (berteval.pretrain.pairs), no dropout while pre-training, a "
       "150 M-token schedule")
PRETRAINED: dict[str, Pretrained] = {
    "wiki-bert-mini": Pretrained(
        "wiki-bert-mini", True,
        "first generation (19.9 M tokens; its NSP head learned B's final full stop, see docs/findings/"
        "pretraining.md): BERT-Mini (4 layers, hidden 256) pre-trained here from scratch on Wikipedia with masked "
        "LM + next-sentence prediction: its pooler and NSP head are trained", twin="wiki-bert-mini-nonsp"),
    "wiki-bert-mini-nonsp": Pretrained(
        "wiki-bert-mini-nonsp", False,
        "first generation (19.9 M tokens): the same BERT-Mini, same text, examples, order and initialisation, "
        "masked LM only: its pooler and NSP head are exactly as initialised (the control)", twin="wiki-bert-mini"),
    "wiki-bert-mini-g2": Pretrained(
        "wiki-bert-mini-g2", True, _G2 + ", masked LM + next-sentence prediction: its pooler and NSP head are "
        "trained", recipe="gen2", twin="wiki-bert-mini-g2-nonsp"),
    "wiki-bert-mini-g2-nonsp": Pretrained(
        "wiki-bert-mini-g2-nonsp", False, _G2 + ", masked LM only (the same examples, order and initialisation): "
        "its pooler and NSP head are exactly as initialised (the control)", recipe="gen2", twin="wiki-bert-mini-g2"),
    "wiki-bert-mini-g2-50m": Pretrained(
        "wiki-bert-mini-g2-50m", True, _G2 + ": the weights of wiki-bert-mini-g2 at step 12,600 (50.5 M tokens, "
        "the seed-1 pair's budget), masked LM + NSP", recipe="gen2", twin="wiki-bert-mini-g2-nonsp-50m",
        snapshot_of="wiki-bert-mini-g2", at_step=12_600),
    "wiki-bert-mini-g2-nonsp-50m": Pretrained(
        "wiki-bert-mini-g2-nonsp-50m", False, _G2 + ": the weights of wiki-bert-mini-g2-nonsp at step 12,600 "
        "(50.5 M tokens), masked LM only", recipe="gen2", twin="wiki-bert-mini-g2-50m",
        snapshot_of="wiki-bert-mini-g2-nonsp", at_step=12_600),
    "wiki-bert-mini-g2-seed1": Pretrained(
        "wiki-bert-mini-g2-seed1", True, _G2 + ", pre-training seed 1 (50 M tokens), masked LM + NSP",
        recipe="gen2", seed=1, twin="wiki-bert-mini-g2-seed1-nonsp"),
    "wiki-bert-mini-g2-seed1-nonsp": Pretrained(
        "wiki-bert-mini-g2-seed1-nonsp", False, _G2 + ", pre-training seed 1 (50 M tokens), masked LM only",
        recipe="gen2", seed=1, twin="wiki-bert-mini-g2-seed1"),
}


def folder(name: str, results_root: Path | None = None) -> Path:
    from .. import config

    return config.results_root(results_root) / "encoders" / name
