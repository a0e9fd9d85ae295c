"""What every derivation shares: its inputs (`Context`), its result (`Outcome`) and the
registry entry that names a way of making a variant (`Recipe`). Light: no torch here."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # importing berteval.models loads torch and transformers: not for --help
    from ..models.derived import DerivedName


@dataclass
class Context:
    spec: DerivedName
    data_dir: Path | None
    out: Path  # the results root; artifacts go to <out>/encoders/<folder>
    seed: int
    hyper: dict  # the recipe's defaults with the command's overrides
    dtype: str = "fp32"
    progress: bool = True
    stop_after_steps: int | None = None  # tests: simulate a kill after this many steps
    command: str = ""  # the command line, for the record
    resume_weights: Path | None = None  # a run that spans sessions: its committed resume state, if not the default

    def schedule(self, n_examples: int) -> tuple[float, int]:
        """(epochs, optimiser steps) for `n_examples`: `max_steps`, when given, wins over `epochs`."""
        per_epoch = -(-n_examples // self.hyper["batch_size"])
        if self.hyper.get("max_steps") is not None:
            return self.hyper["max_steps"] / per_epoch, int(self.hyper["max_steps"])
        return self.hyper["epochs"], max(1, int(round(self.hyper["epochs"] * per_epoch)))

    def checkpoint_dir(self, *identity, spans_sessions: bool = False) -> Path:
        """A checkpoint folder under the cache, named by everything that determines the weights.
        `spans_sessions`: a run resumed over several working sessions, as the scratch twins' are
        (`berteval.pretrain.command`): its key leaves out the dtype (sessions run on CPUs that differ, each in the
        precision it runs fastest; the record lists what ran when) and how often it evaluates or checkpoints
        (neither changes the weights), so a session with other values finds the same checkpoint."""
        from .. import config

        hyper = ({k: v for k, v in self.hyper.items() if k not in ("eval_every", "checkpoint_every")}
                 if spans_sessions else self.hyper)
        key = json.dumps([self.spec.folder_name, self.seed, None if spans_sessions else self.dtype, hyper,
                          *identity], sort_keys=True, default=str)
        return (config.cache_dir() / "checkpoints" / "derive"
                / f"{self.spec.folder_name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}")


@dataclass
class Outcome:
    complete: bool  # False: stopped early (resume by rerunning the command)
    steps: int
    steps_total: int
    record: dict = field(default_factory=dict)  # variant-specific record parts (data, pairs, training, ...)
    tensors: dict = field(default_factory=dict)  # what was written, by state-dict key (tests compare)
    checkpoint: Path | None = None  # cleared once the artifacts are written


@dataclass(frozen=True)
class Recipe:
    objective: str  # the training objective, in words, for the record and `--help`
    defaults: dict  # hyper-parameters (the command's options override them)
    run: Callable[[Context, Path], Outcome]  # (context, staging folder) -> outcome; writes artifacts there
    # a run that spans sessions: (context) -> exit code, writing its resume state to commit (--export-resume)
    export: Callable[[Context], int] | None = None
