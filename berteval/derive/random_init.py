"""`<base>+random`: the base's architecture, config and tokenizer with seeded random weights.

The floor every probe is read against: what a linear probe finds in vectors of an encoder
that learned nothing. The weights are transformers' own initialisation of
*ForNextSentencePrediction under `torch.manual_seed(seed)` (`berteval.models.derived.
random_model`), so nothing needs committing; the record holds the weights' content hash,
the loader regenerates them and refuses if the hash differs (a transformers upgrade that
changes its initialisation shows instead of silently changing the floor).
"""

from __future__ import annotations

from pathlib import Path

from .. import models
from ..errors import BertevalError
from ..models import derived
from .base import Context, Outcome


def run(ctx: Context, stage: Path) -> Outcome:
    from transformers import AutoConfig

    base = models.identify(ctx.spec.base)
    with models.quiet_loader():
        config = AutoConfig.from_pretrained(base.path, local_files_only=True)
    model = derived.random_model(config, ctx.seed)
    sha = derived.state_sha256(model.state_dict())
    again = derived.state_sha256(derived.random_model(config, ctx.seed).state_dict())
    if again != sha:
        raise BertevalError("the seeded initialisation is not reproducible in this process: cannot derive a "
                            "random control whose weights the loader can regenerate")
    n_params = sum(p.numel() for p in model.parameters())
    record = {"weights_sha256": sha,
              "init": f"{type(model).__name__}.from_config(base config) under torch.manual_seed({ctx.seed}) "
                      f"(transformers' _init_weights: normal(0, initializer_range) weights, zero biases, "
                      f"LayerNorm 1/0)",
              "parameters": n_params,
              "reproduced_in_process": True}
    return Outcome(True, 0, 0, record, dict(model.state_dict()))
