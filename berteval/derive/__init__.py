"""`berteval derive`: make the derived encoders (`<base>+<variant>`) that `berteval.models`
loads, each by one seeded, resumable command that writes small artifacts and a provenance
record (`derivation.json`) under `<results root>/encoders/<name>/`.

    python -m berteval.derive default+nsp-pooler --data-dir ../shared/data
    python -m berteval.derive default+random
    python -m berteval.derive default+mlm-nsp --data-dir ../shared/data
    python -m berteval.derive default+mlm-nsp-wiki --data-dir ../shared/data  # issue 43's pair, on the twins'
    python -m berteval.derive default+mlm-wiki --data-dir ../shared/data      # Wikipedia text (continued.py)
    python -m berteval.derive default+mlm-wiki --data-dir ../shared/data --export-resume  # commit it, resume later

`RECIPES` is the one registry of how each variant is made (its keys are the variants of
`berteval.models.derived.VARIANTS`, which says how each is loaded). Training text: only the
SQuAD train subset's Wikipedia paragraphs (`text`); pairs as BERT builds them (`segments`);
masked LM as BERT masks (`masking`). This module stays light: a recipe's training code is
imported when it runs.
"""

from __future__ import annotations

from .base import Context, Outcome, Recipe


def _nsp_pooler(ctx, stage):
    from . import nsp_pooler

    return nsp_pooler.run(ctx, stage)


def _mlm_nsp(ctx, stage):
    from . import mlm_nsp

    return mlm_nsp.run(ctx, stage)


def _mlm_nsp_wiki(ctx, stage):
    from . import continued

    return continued.run(ctx, stage, nsp=True)


def _mlm_wiki(ctx, stage):
    from . import continued

    return continued.run(ctx, stage, nsp=False)


def _export_wiki(ctx):
    from . import continued

    return continued.export(ctx)


def _random(ctx, stage):
    from . import random_init

    return random_init.run(ctx, stage)


# Hyper-parameter defaults live here (not in the training modules) so `--help` and the
# registry need no torch; the values and their reasons are in each module's docstring.
# Issue 43's pair (berteval.derive.continued): ~10.2 M tokens at 128 tokens x 32 per step (2,500 steps);
# lr 5e-4 as +mlm-nsp's LoRA (a full run takes --lr 1e-4, BERT's; the short comparison picks); the examples
# as the twins prepare them (one 128-token pass; the 512-token set only for the final held-out score).
CONTINUED = {"tuning": "lora", "steps": 2_500, "batch_size": 32, "lr": 5e-4, "warmup_steps": 125,
             "weight_decay": 0.01, "beta1": 0.9, "beta2": 0.999, "max_grad_norm": 1.0, "long_share": 0.0,
             "long_batch_size": 8, "eval_every": 250, "checkpoint_every": 50, "rank": 16, "alpha": 32,
             "lora_dropout": 0.0, "vocab_size": 30_522, "short_seq_prob": 0.1, "long_sequences": 2_000,
             "limit_articles": None}

RECIPES: dict[str, Recipe] = {
    "nsp-pooler": Recipe(
        "next-sentence prediction (cross-entropy over IsNext/NotNext) through the pooler, on the frozen encoder's "
        "last-layer [CLS] states; BERT-style segment pairs",
        {"dupe_factor": 10, "max_length": 128, "short_seq_prob": 0.1, "epochs": 3.0, "batch_size": 64, "lr": 1e-3,
         "warmup_ratio": 0.1, "weight_decay": 0.01, "max_grad_norm": 1.0},
        _nsp_pooler),
    "mlm-nsp": Recipe(
        "BERT pre-training: masked LM (15% of WordPiece tokens; 80% [MASK], 10% random, 10% unchanged) + "
        "next-sentence prediction, loss = mean masked-token cross-entropy + NSP cross-entropy; LoRA on every encoder "
        "linear layer, pooler, NSP head and MLM transform/bias trained, embeddings and tied decoder frozen",
        {"dupe_factor": 20, "max_length": 128, "short_seq_prob": 0.1, "max_predictions": 20, "epochs": 1.0,
         "batch_size": 32, "lr": 5e-4, "warmup_ratio": 0.05, "weight_decay": 0.01, "max_grad_norm": 1.0,
         "rank": 16, "alpha": 32, "lora_dropout": 0.0},
        _mlm_nsp),
    "mlm-nsp-wiki": Recipe(
        "BERT pre-training continued on the twins' Wikipedia text (cue-free NSP pairs, the base's own vocabulary): "
        "masked LM (15%; 80/10/10) + NSP; LoRA on every encoder linear layer (or every encoder weight: --tuning "
        "full), pooler, NSP head and MLM transform/bias trained, embeddings and tied decoder frozen",
        CONTINUED, _mlm_nsp_wiki, _export_wiki),
    "mlm-wiki": Recipe(
        "masked LM alone continued on the twins' Wikipedia text, the same start, examples, order and steps as "
        "+mlm-nsp-wiki; pooler and NSP head left as initialised (excluded from the optimiser)",
        CONTINUED, _mlm_wiki, _export_wiki),
    "random": Recipe("none: transformers' initialisation under a fixed seed (no training)", {}, _random),
}

from .cli import add_arguments, command  # noqa: E402  (the command reads RECIPES)

__all__ = ["RECIPES", "Context", "Outcome", "Recipe", "add_arguments", "command"]
