"""The `derive` command: argparse options and the run that turns a recipe into artifacts.

`add_arguments(parser)` and `command(args) -> int` are what `python -m berteval derive` wires
in (`python -m berteval.derive` runs them on their own). Exit codes: 0 derived (or already
there), 2 a user error (BertevalError, printed without a traceback by the caller), 3 stopped
before the end (rerun the same command to resume from the last checkpoint).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import time

from .. import config
from ..errors import BertevalError
from .base import Context, Outcome

STOPPED = 3
# Options that override a recipe's hyper-parameter of the same name (where it has one).
_HYPER = {"dupe_factor": int, "max_length": int, "short_seq_prob": float, "epochs": float, "batch_size": int,
          "lr": float, "warmup_ratio": float, "rank": int, "alpha": int, "max_predictions": int,
          # the Wikipedia-continued pair (+mlm-nsp-wiki, +mlm-wiki): steps, LoRA or every encoder weight, text size
          "steps": int, "tuning": str, "warmup_steps": int, "limit_articles": int, "eval_every": int,
          "checkpoint_every": int, "long_sequences": int}

_CHOICES = {"tuning": ("lora", "full")}
_HELP = {"tuning": "+mlm-nsp-wiki and +mlm-wiki: what trains. lora (default): a rank-16 LoRA adapter on every encoder "
                   "linear layer, merged at load time (small artifacts, cheap steps); full: every encoder weight. "
                   "Both train the MLM transform/bias (and the NSP twin its pooler and NSP head) and keep the "
                   "embeddings and tied decoder frozen"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from . import RECIPES

    names = ", ".join(f"default+{v}" for v in RECIPES)
    parser.add_argument("name", help=f"<base>+<variant>: {names}; the base may be a local model folder")
    parser.add_argument("--data-dir", help="folder holding squad/train-subset.json, for the +*-wiki pair wikipedia/ "
                                           "and squad/dev-v1.1.json (or $BERTEVAL_DATA); not needed for +random")
    parser.add_argument("--out", help="results root; artifacts go to <out>/encoders/<name>/ "
                                      "(default: $BERTEVAL_RESULTS or the committed leaderboard/results)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", choices=("fp32", "bf16", "auto"), default="fp32",
                        help="fp32 (default); bf16 autocast only pays on CPUs with AMX or AVX512-BF16; auto: bf16 "
                             "where it does (or the GPU has bf16), else fp32; derivation.json names what ran")
    parser.add_argument("--force", action="store_true", help="derive again even if the artifacts exist")
    parser.add_argument("--device", help="auto, cpu, cuda, cuda:N or mps (or $BERTEVAL_DEVICE)")
    parser.add_argument("--max-steps", type=int, help="train this many optimiser steps (instead of --epochs)")
    for key, kind in _HYPER.items():
        parser.add_argument("--" + key.replace("_", "-"), type=kind, choices=_CHOICES.get(key),
                            help=_HELP.get(key, argparse.SUPPRESS if key in ("alpha", "max_predictions", "warmup_ratio")
                                           else f"override the recipe's {key}"))
    parser.add_argument("--export-resume", action="store_true",
                        help="+mlm-nsp-wiki and +mlm-wiki: write the run's trained weights (LoRA adapter or encoder "
                             "layers, and heads), tokenizer and run state (no optimiser state) to "
                             "<out>/pretrain-resume/<name>/ for committing, and stop: what a session leaves so the run "
                             "survives the loss of this machine's cache")
    parser.add_argument("--resume-weights", help="+mlm-nsp-wiki and +mlm-wiki: where a lost machine's run resumes "
                                                 "from when no checkpoint is in the cache (default "
                                                 "<out>/pretrain-resume/<name>/ if it exists)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--stop-after-steps", type=int, help=argparse.SUPPRESS)  # tests: simulate a kill


def _hyper(recipe, args) -> dict:
    hyper = dict(recipe.defaults)
    for key in _HYPER:
        value = getattr(args, key, None)
        if value is not None:
            if key not in hyper:
                raise BertevalError(f"--{key.replace('_', '-')} does not apply to this variant")
            hyper[key] = value
    return hyper


def command(args) -> int:
    """Run `derive` for parsed `args`: the exit code (see the module docstring)."""
    return derive(args)[0]


def derive(args) -> tuple[int, Outcome | None]:
    """The exit code and the outcome (None when nothing ran): tests compare the trained tensors."""
    from .. import models, provenance
    from ..models import derived
    from . import RECIPES, artifacts

    provenance.git_commit()  # read (and cached) now: the record names the code that starts the run
    from .. import devices

    devices.use(getattr(args, "device", None))

    spec = derived.parse(args.name)
    if spec is None:
        raise BertevalError(f"{args.name!r} is not a derived name: <base>+<variant>, e.g. default+nsp-pooler")
    recipe = RECIPES[spec.variant.suffix]
    out = config.results_root(args.out)
    folder = derived.encoders_root(out) / spec.folder_name
    if (folder / derived.RECORD).is_file() and not args.force:
        print(f"{spec.name}: already derived ({folder / derived.RECORD}); --force derives it again")
        return 0, None
    base = models.identify(spec.base)
    if base.source == "derived":
        raise BertevalError("derive from a plain model, not from a derived one")
    hyper = _hyper(recipe, args)
    if (args.export_resume or args.resume_weights) and recipe.export is None:
        spans = ", ".join(f"+{v}" for v, r in RECIPES.items() if r.export is not None)
        raise BertevalError(f"--export-resume and --resume-weights apply to the runs that span sessions ({spans})")
    data_dir = config.data_dir(args.data_dir) if hyper else None
    from .. import precision

    dtype = precision.resolve(args.dtype)  # on the device chosen above; derivation.json names what ran
    if dtype != args.dtype:
        print(f"note: --dtype {args.dtype} runs {dtype} here", file=sys.stderr)
    elif note := precision.emulated_bf16_note(dtype):
        print(f"note: {note}", file=sys.stderr)
    ctx = Context(spec, data_dir, out, args.seed, hyper, dtype, not args.no_progress, args.stop_after_steps,
                  _command_line(args), args.resume_weights)
    if args.export_resume:
        return recipe.export(ctx), None
    if args.max_steps is not None:
        if "epochs" not in hyper:
            raise BertevalError("--max-steps does not apply to this variant")
        ctx.hyper["max_steps"] = args.max_steps  # the recipe turns it into epochs once the pairs are counted
    t0 = time.perf_counter()
    stage = artifacts.staging(folder)
    try:
        outcome = recipe.run(ctx, stage)
        if not outcome.complete:
            print(f"{spec.name}: stopped after {outcome.steps} of {outcome.steps_total} steps; the checkpoint is in "
                  f"{outcome.checkpoint}. Rerun the same command to resume.", file=sys.stderr)
            return STOPPED, outcome
        outcome.record["wall_s"] = round(time.perf_counter() - t0, 1)
        rec = artifacts.publish(ctx, recipe.objective, base, outcome, stage, folder)
    finally:
        shutil.rmtree(stage, ignore_errors=True)  # published (moved) or abandoned: no half encoder stays
    if outcome.checkpoint is not None:
        from .. import training

        training.clear_checkpoint(training.TrainConfig(checkpoint_dir=outcome.checkpoint))
    models.identify.cache_clear()
    models.load.cache_clear()
    _report(spec, folder, rec)
    return 0, outcome


def _command_line(args) -> str:
    """The command as typed: `python -m berteval.derive ...`, or the berteval CLI's own argv."""
    if getattr(args, "argv", None) is not None:
        return "python -m berteval.derive " + " ".join(shlex.quote(a) for a in args.argv)
    return "python -m berteval " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def _report(spec, folder, rec: dict) -> None:
    size = sum(f["bytes"] for f in rec["artifacts"]["files"].values())
    train = rec.get("training", {})
    lines = [f"{spec.name}: derived into {folder} ({len(rec['artifacts']['files'])} files, {size / 2**20:.2f} MiB), "
             f"{rec['wall_s']} s"]
    if "loss" in train:
        lines.append(f"  steps {train['steps']}, loss first {train['loss']['first']} last {train['loss']['last']} "
                     f"(last 10% mean {train['loss']['last_10pct_mean']})")
    for key in ("nsp_accuracy", "mlm_accuracy"):
        if key in train:
            lines.append(f"  {key} over the last 10% of steps: {train[key]['last_10pct_mean']}")
    print("\n".join(lines))


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m berteval.derive", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    args.argv = list(argv)  # for the record's command line
    return args


def main(argv: list[str] | None = None) -> int:
    try:
        return command(parse(list(sys.argv[1:] if argv is None else argv)))
    except BertevalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
