"""Pairs of twins: an NSP-trained model and its no-NSP control, trained identically: the one registry of them.

What NSP changes is measured only between two models that differ in the next-sentence loss alone (BERT's Table 5
ablation, "No NSP"): the same start, text, examples, order and steps. Each `TwinPair` names such a pair by a short
name (`python -m leaderboard.twins --pair NAME`), its NSP model and its control as `--model` takes them, and says
in words what the pair is (generation, pre-training seed, token budget) and what a reader must know before
trusting its differences (`caveat`: the first generation's NSP learned a punctuation cue), said once, where the
pair is shown. The leaderboard (`leaderboard.twins`, the report, the app's findings) reads every pair from here;
adding a pair is one entry in `TWINS`.

The pairs pre-trained here take their control, seed and generation from `PRETRAINED` (each NSP model's `twin`
field), so no name is written twice. Two further fields carry the seed comparison of issue 41 (item 4): a pair
trained with another pre-training seed names, in `spread_against`, the pair it is compared with at the same token
budget (the seed-1 pair against the main pair's 50 M-token snapshot), and that snapshot pair names, in
`snapshot_of`, the run it is an earlier state of (the main pair, whose differences the spread judges). A pair whose
models have no records yet gets an honest line on the leaderboard, never an error. Light: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import DEFAULT, DEFAULT_MODEL_ID
from .pretrained import ID_PREFIX, PRETRAINED

# What a pre-training recipe (`Pretrained.recipe`) is called in a pair's label.
GENERATIONS = {"gen1": "first generation", "gen2": "second generation"}


@dataclass(frozen=True)
class TwinPair:
    name: str  # short name: `--pair gen2`
    nsp: str  # the model trained with the NSP loss, as `--model` takes it (`wiki-bert-mini-g2`, `default+...`)
    control: str  # its control: the same training without the NSP loss
    label: str  # what the pair is, in words: generation, pre-training seed, token budget
    seed: int = 0  # the pre-training seed of both models
    caveat: str = ""  # what a reader must know before trusting its NSP - no-NSP differences ("" when nothing)
    spread_against: str = ""  # the pair of another pre-training seed at the same budget (a `TWINS` name)
    snapshot_of: str = ""  # the pair whose run these are earlier weights of (a `TWINS` name)

    @property
    def nsp_id(self) -> str:
        """The NSP model's name in the records."""
        return record_id(self.nsp)

    @property
    def control_id(self) -> str:
        return record_id(self.control)

    @property
    def models(self) -> tuple[str, str]:
        """(NSP, control) as the records name them."""
        return self.nsp_id, self.control_id


def record_id(name: str) -> str:
    """The `model` field records of `name` carry: `default[+variant]` under the embedded model's hub id
    (`sentence-transformers/all-MiniLM-L6-v2+mlm-wiki`), a model pre-trained here as `berteval/<name>` (its
    registered id, or that form for a snapshot not registered yet), any other name as given."""
    if name == DEFAULT or name.startswith(DEFAULT + "+"):
        return DEFAULT_MODEL_ID + name[len(DEFAULT):]
    if name in PRETRAINED:
        return PRETRAINED[name].model_id
    return name if "/" in name or "+" in name else ID_PREFIX + name


def _scratch(name: str, nsp: str, budget: str, **kw) -> TwinPair:
    """A pair pre-trained here from scratch: its control, seed and generation read from `PRETRAINED[nsp]`."""
    model = PRETRAINED[nsp]
    generation = GENERATIONS.get(model.recipe, f"recipe {model.recipe}")
    return TwinPair(name, nsp, model.twin, f"{generation}, pre-training seed {model.seed}, {budget}",
                    seed=model.seed, **kw)


# Registry order is reading order: the main pair first, then the seed comparison, the strong encoder's pair, and
# the first generation last (kept, labelled, superseded).
_PAIRS = (
    _scratch("gen2", "wiki-bert-mini-g2", "~170 M tokens (the main pair; cue-free NSP pairs)"),
    _scratch("gen2-seed1", "wiki-bert-mini-g2-seed1", "~50 M tokens (cue-free NSP pairs)", spread_against="gen2-50m"),
    # The main pair's weights at step 12,600 (about 50.5 M tokens, `snapshot_steps` of the gen2 recipe): the seed-1
    # pair's budget (`Pretrained.snapshot_of`).
    _scratch("gen2-50m", "wiki-bert-mini-g2-50m", "the main pair's weights at 50.5 M tokens (step 12,600)",
             snapshot_of="gen2"),
    TwinPair("minilm-wiki", "default+mlm-nsp-wiki", "default+mlm-wiki",
             "a strong encoder: all-MiniLM-L6-v2 continued on the twins' Wikipedia text (cue-free NSP pairs) with "
             "and without NSP, from the same start on the same examples and steps (issue 43)"),
    _scratch("gen1", "wiki-bert-mini", "19.9 M tokens",
             caveat="Its NSP head learned a punctuation cue, not sentence order or topic (a NotNext B ended "
                    "mid-sentence, an IsNext B ended a sentence; docs/findings/pretraining.md), so its NSP - no-NSP "
                    "differences compare masked LM with masked LM plus a full-stop detector."),
)
TWINS: dict[str, TwinPair] = {p.name: p for p in _PAIRS}
MAIN = "gen2"  # the pair the findings quote; the seed spread judges its differences


def spread_pairs() -> list[tuple[TwinPair, TwinPair, TwinPair]]:
    """(other seed, same-budget reference, main) for every pair with `spread_against`: the seed-1 pair, the main
    pair's 50 M snapshot, and the main pair itself (the reference where it is no snapshot)."""
    out = []
    for pair in TWINS.values():
        if pair.spread_against:
            ref = TWINS[pair.spread_against]
            out.append((pair, ref, TWINS[ref.snapshot_of] if ref.snapshot_of else ref))
    return out
