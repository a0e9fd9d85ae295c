"""`python -m berteval pretrain <name>`: pre-train one of the twins (`berteval.models.pretrained`)
from scratch and publish it as a standard checkpoint folder.

    python -m berteval pretrain wiki-bert-mini --data-dir ../shared/data --threads 1
    python -m berteval pretrain wiki-bert-mini-nonsp --data-dir ../shared/data --threads 1

Seeded and resumable: the prepared examples are cached (verified by checksum), the run
checkpoints every `--checkpoint-every` steps, and rerunning the same command after a kill
resumes. `--prepare-only` builds the examples and stops (run it once before starting both
twins side by side). `--stop-after-steps N` stops after N more steps (resume later): a
tuning run is the first N steps of the real run. The published folder holds config.json,
the tokenizer, safetensors shards under 9 MB each, README.md (the model card, from the
record) and derivation.json (every input's checksum, the hyper-parameters, the curves,
tokens seen, wall time, versions, device). Exit codes as `derive`: 0 done, 2 a user error,
3 stopped before the end.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import shutil
import sys
import time
from pathlib import Path

from ..errors import BertevalError
from ..models.pretrained import PRETRAINED, RECORD

STOPPED = 3
SHARD = "9MB"  # decimal: every shard <= 9,000,000 bytes (the largest tensor, the embeddings, is 8.4 MB)
MAX_FILE_BYTES = 9_000_000
# BERT-Mini (Turc et al. 2019) and BERT's recipe; the schedule values were chosen on short tuning runs
# (docs/findings/pretraining.md). Every value is recorded; the options below override them.
DEFAULTS = {
    "hidden_size": 256, "layers": 4, "heads": 4, "intermediate_size": 1024,
    "vocab_size": 8_192, "short_seq_prob": 0.1, "long_sequences": 8_000, "limit_articles": None,
    "steps": 10_000, "tiny_share": 0.25, "long_share": 0.1, "tiny_batch_size": 128, "batch_size": 32,
    "long_batch_size": 8, "tiny_sequences": 400_000,
    "lr": 1e-3, "warmup_steps": 500, "beta1": 0.9, "beta2": 0.999, "weight_decay": 0.01, "max_grad_norm": 1.0,
    "eval_every": 500, "checkpoint_every": 250, "mlm_bias_init": "log-unigram",
}
# The recipes, one per generation of twins (`Pretrained.recipe`). gen2 (issue 41): the same architecture,
# checkpoint format and batch sizes as gen1; training changed for more learning per CPU hour: no dropout while
# pre-training (one pass over the text, as Cramming; the saved config keeps BERT's 0.1 for fine-tuning), a
# schedule of 41,600 steps x 4,096 tokens (~170 M tokens: warm-up 1,200 steps, linear decay to 0 at the last
# step), two passes of 128-token pairs with fresh cuts and masks instead of one pass repeated, a 32-token phase
# of 5% of the steps (gen1: 25%), and cue-free NSP pairs. Chosen on short runs of the NSP twin at equal tokens
# (docs/findings/pretraining.md): the first generation's batch (4,096 tokens a step) at lr 1e-3 beat 4x that
# batch at lr 1e-3 and at 2e-3 (held-out masked-LM accuracy 0.261 vs 0.241 at 9.8 M tokens), and the bench
# found the larger batch buys no tokens/s on one thread. Evaluation every 1,600 steps (6.6 M tokens): one
# evaluation costs about 36 s, a tenth of 400 steps. The snapshot at step 12,600 (about 50.5 M tokens) is the
# main pair's weights at the seed-1 pair's budget (issue 41 item 4: at least 50 M tokens; step 12,400, the first
# choice, is 49.69 M).
RECIPES = {
    "gen1": DEFAULTS,
    "gen2": {**DEFAULTS, "steps": 41_600, "tiny_share": 0.05, "long_share": 0.1, "tiny_sequences": 270_000,
             "long_sequences": 34_000, "short_passes": 2, "warmup_steps": 1_200, "pretrain_dropout": 0.0,
             "eval_every": 1_600, "checkpoint_every": 200, "snapshot_steps": [12_600]},
}
_OPTIONS = {"short_passes": int, "pretrain_dropout": float, "steps": int, "lr": float, "warmup_steps": int, "batch_size": int, "long_batch_size": int,
            "long_share": float, "tiny_share": float, "tiny_batch_size": int, "tiny_sequences": int, "beta2": float, "eval_every": int, "checkpoint_every": int, "vocab_size": int,
            "short_seq_prob": float, "long_sequences": int, "limit_articles": int, "hidden_size": int,
            "layers": int, "heads": int, "intermediate_size": int, "mlm_bias_init": str}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", choices=sorted(PRETRAINED), help="which twin")
    parser.add_argument("--data-dir", help="folder holding wikipedia/ and squad/dev-v1.1.json (or $BERTEVAL_DATA)")
    parser.add_argument("--out", help="results root; the model goes to <out>/encoders/<name>/ "
                                      "(default: $BERTEVAL_RESULTS or the committed leaderboard/results)")
    parser.add_argument("--seed", type=int, help="pre-training seed (default: the twin's, 0 or 1)")
    parser.add_argument("--device", help="auto (default), cpu, cuda, cuda:N or mps (or $BERTEVAL_DEVICE)")
    parser.add_argument("--dtype", choices=("auto", "bf16", "fp32"), default="auto",
                        help="auto (default): bf16 autocast (fp32 master weights) where the CPU or GPU computes bf16 "
                             "natively, fp32 elsewhere (on an AVX2-only CPU bf16 ran 21x slower); a run spanning "
                             "sessions records what each session ran")
    parser.add_argument("--threads", type=int, help="torch threads (two twins side by side: 1 each)")
    parser.add_argument("--checkpoint-dir", help="where the resume state lives (default: under $BERTEVAL_CACHE); "
                                                 "put it in the repository to survive a new machine")
    parser.add_argument("--prepare-only", action="store_true", help="build the examples (cached) and stop")
    parser.add_argument("--export-resume", action="store_true",
                        help="write the run's current weights, tokenizer and run state (no optimiser state) to "
                             "<out>/pretrain-resume/<name>/ for committing, and stop: what a session leaves so the "
                             "run survives the loss of this machine's cache")
    parser.add_argument("--resume-weights", help="where a lost machine's run resumes from when no checkpoint file "
                                                 "is here (default <out>/pretrain-resume/<name>/ if it exists); "
                                                 "prepare with --vocab pointing at the same folder")
    parser.add_argument("--stop-after-steps", type=int, help="stop after this many more steps (resume later)")
    parser.add_argument("--publish-at-step", type=int,
                        help="train to this step of the schedule and publish the model there, recorded as stopped "
                             "early (the schedule is unchanged and the resume state kept: --force later resumes it "
                             "to the end); for a run that cannot finish in the time there is")
    parser.add_argument("--vocab", help="a saved WordPiece vocabulary to use instead of training one (a tokenizer "
                                        "folder or a published twin's folder): the trainer is not deterministic, so "
                                        "this is how the very same examples are rebuilt")
    parser.add_argument("--force", action="store_true", help="pre-train again even if the model exists")
    parser.add_argument("--no-progress", action="store_true", help="quieter output")
    for key, kind in _OPTIONS.items():
        parser.add_argument("--" + key.replace("_", "-"), type=kind,
                            help=f"default: the twin's recipe ({', '.join(f'{r} {v.get(key)}' for r, v in RECIPES.items())})")


def hyperparameters(args) -> dict:
    hyper = dict(RECIPES[PRETRAINED[args.name].recipe])
    for key in _OPTIONS:
        value = getattr(args, key, None)
        if value is not None:
            hyper[key] = value
    if hyper["steps"] < 1 or hyper["batch_size"] < 1 or not 0 <= hyper["long_share"] < 1:
        raise BertevalError("--steps and --batch-size must be positive and --long-share in [0, 1)")
    if not 0 <= hyper["tiny_share"] < 1 - hyper["long_share"]:
        raise BertevalError("--tiny-share must be in [0, 1 - long share): some steps must stay at 128 tokens")
    if hyper["tiny_share"] > 0 and (hyper["tiny_sequences"] < 1 or hyper["tiny_batch_size"] < 1):
        raise BertevalError("a 32-token phase (--tiny-share > 0) needs --tiny-sequences and --tiny-batch-size > 0")
    if getattr(args, "vocab", None):  # only when given: the resume key of a run that trains its own stays the same
        hyper["vocab"] = str(args.vocab)
    if hyper["tiny_share"] == 0:
        hyper["tiny_sequences"] = 0  # nothing to prepare: the examples keep the cache key of a 128/512 schedule
    if hyper["mlm_bias_init"] not in ("zero", "log-unigram"):
        raise BertevalError("--mlm-bias-init: zero (transformers' initialisation) or log-unigram")
    return hyper


def _checkpoint_path(args, name: str, hyper: dict, prepared_key: str, device) -> Path:
    from .. import config
    from . import examples

    # How often the run evaluates or checkpoints does not change its weights: not part of the key, so a
    # tuning run's prefix can be continued with other intervals.
    # Nor does the vocabulary's source: on a new machine the run resumes with `--vocab <committed resume folder>`
    # (the same vocabulary, so the same examples); train() checks the vocabulary's checksum against the run's.
    weights = {k: v for k, v in hyper.items()
               if k not in ("eval_every", "checkpoint_every", "snapshot_steps", "vocab")}
    # Nor do the dtype and device: a run spans sessions on CPUs that differ (bf16 where the CPU runs it fast,
    # fp32 elsewhere), each session resumes the same run, and the record lists what ran when (RunState.segments).
    key = examples.cache_key({"name": name, "seed": args.seed, "hyper": weights,
                                   **({"examples": prepared_key} if PRETRAINED[name].recipe == "gen1" else {})})
    root = Path(args.checkpoint_dir) if args.checkpoint_dir else config.cache_dir() / "checkpoints" / "pretrain"
    root.mkdir(parents=True, exist_ok=True)
    return root / f"{name}-{key}.pt"


def _check_snapshot(args, twin) -> None:
    """A snapshot (`Pretrained.snapshot_of`) publishes its run's committed weights at `at_step` exactly: no step
    option, and the folder must be there at that step."""
    if args.publish_at_step not in (None, twin.at_step) or args.stop_after_steps is not None:
        raise BertevalError(f"{args.name} is {twin.snapshot_of}'s weights at step {twin.at_step}: it takes no "
                            f"--publish-at-step or --stop-after-steps (train {twin.snapshot_of} instead)")
    args.publish_at_step = twin.at_step
    source = _resume_source(args)
    if not (source / "run_state.json").is_file():
        raise BertevalError(f"{args.name} is published from {source}, which is not here: {twin.snapshot_of}'s "
                            f"run writes it at step {twin.at_step} (beside its checkpoint, *.step{twin.at_step}); "
                            f"copy that folder there, or pass --resume-weights")
    if (step := json.loads((source / "run_state.json").read_text()).get("step")) != twin.at_step:
        raise BertevalError(f"{source} holds step {step}, not {twin.at_step}: {args.name} is the weights at "
                            f"step {twin.at_step} exactly")


def _vocab_of_resume_folder(args, hyper: dict, data_dir: Path) -> None:
    """On a machine whose cache has not prepared this run's examples, a run with a committed resume folder reuses
    that folder's vocabulary (as `--vocab FOLDER` would): training a new one would give other examples, which the
    resumed weights were not trained on (the WordPiece trainer is not deterministic), and the run would refuse
    them only after the half hour of preparing them. Where the examples are cached (the machine that trained the
    vocabulary), nothing changes."""
    from .. import config
    from . import examples

    if hyper.get("vocab") or args.force:
        return
    folder = _resume_source(args)
    if not (folder / "tokenizer.json").is_file() or examples.is_prepared(data_dir, config.cache_dir(), args.seed,
                                                                        hyper):
        return
    hyper["vocab"] = str(folder)
    print(f"the vocabulary is the one the resumed weights were trained with ({folder}), as --vocab would take it "
          "(a new one would give other examples)", flush=True)  # said even under --no-progress: it decides which examples the run reads


def command(args) -> int:
    from .. import config, devices, provenance
    from ..models import pretrained

    provenance.git_commit()  # the record names the code that starts the run
    twin = PRETRAINED[args.name]
    if args.seed is None:
        args.seed = twin.seed
    if twin.snapshot_of:  # published from its run's committed weights at that step: nothing is trained
        _check_snapshot(args, twin)
    hyper = hyperparameters(args)
    out = pretrained.folder(args.name, args.out)
    if (out / RECORD).is_file() and not args.force and not args.prepare_only:
        print(f"{args.name}: already pre-trained ({out / RECORD}); --force trains it again")
        return 0
    data_dir = config.data_dir(args.data_dir)
    if data_dir is None:
        raise BertevalError("pretrain reads local Wikipedia shards: pass --data-dir (e.g. ../shared/data) or set "
                            "BERTEVAL_DATA")
    device = devices.use(args.device)
    from .. import precision

    args.dtype = precision.resolve(args.dtype, device)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from . import examples, loop

    log = (lambda *a, **k: None) if args.no_progress else (lambda msg: print(msg, flush=True))
    t0 = time.perf_counter()
    _vocab_of_resume_folder(args, hyper, data_dir)
    prepared = examples.prepare(data_dir, config.cache_dir(), args.seed, hyper, log=log)
    if args.prepare_only:
        print(f"prepared: {prepared.folder}")
        return 0
    plan = loop.schedule_plan(hyper)
    if plan["long_steps"] * plan["long_batch"] > len(prepared.train_long) * 4:
        raise BertevalError(f"{plan['long_steps']} long steps of {plan['long_batch']} need more long sequences "
                            f"than the {len(prepared.train_long)} prepared: raise --long-sequences")
    tiny = len(prepared.train_tiny) if prepared.train_tiny is not None else 0
    if plan["tiny_steps"] * plan["tiny_batch"] > tiny * 4:
        raise BertevalError(f"{plan['tiny_steps']} 32-token steps of {plan['tiny_batch']} need more 32-token "
                            f"sequences than the {tiny} prepared: raise --tiny-sequences")
    checkpoint = _checkpoint_path(args, args.name, hyper, prepared.folder.name, device.type)
    resume_dir = _resume_source(args)
    if args.export_resume:
        return export_resume(checkpoint, resume_dir, lambda: loop.build_model(
            {**hyper, "mlm_bias_init": "zero"}, len(prepared.tokenizer), args.seed), prepared.tokenizer)
    progress = checkpoint.with_suffix(".evals.jsonl")
    log(f"{args.name}: {plan['steps']} steps ({plan['tiny_steps']} x {plan['tiny_batch']} x 32 tokens, "
        f"{plan['short_steps']} x {plan['short_batch']} x 128 tokens, "
        f"{plan['long_steps']} x {plan['long_batch']} x 512), device {device}, {torch.get_num_threads()} thread(s); "
        f"checkpoint {checkpoint}")
    dev_pairs = loop.nsp_dev_pairs(data_dir)
    model, state, complete = loop.train(prepared, twin.nsp, hyper, args.seed, device, args.dtype, checkpoint,
                                            dev_pairs, args.stop_after_steps, log, progress,
                                            stop_at_step=args.publish_at_step, resume_weights=resume_dir,
                                            describe=devices.describe(device))
    early = args.publish_at_step is not None and state.step == args.publish_at_step and not complete
    if not complete and not early:
        print(f"{args.name}: stopped at step {state.step} of {plan['steps']}; rerun the same command to resume "
              f"({checkpoint})", file=sys.stderr)
        return STOPPED
    log("final evaluation on every held-out example ...")
    final = loop.evaluation_row(model, prepared, dev_pairs, device, args.dtype, state, None)
    state.evals.append(final)
    log(loop._eval_line(final, plan))
    record = _record(args, twin, hyper, plan, prepared, state, final, device, time.perf_counter() - t0)
    if twin.nsp:  # what the head learned, by editing B's surface only (issue 41's target: berteval.pretrain.edits)
        from . import edits

        log("deletion test on the NSP dev sentence pairs ...")
        record["deletion_test"] = edits.record(model, prepared.tokenizer, dev_pairs)
    if early:  # named in the record and the card, never passed off as the planned run
        record["stopped_early"] = _stopped_early(twin, plan, state, checkpoint, portable(resume_dir, args.out))
    publish(model.cpu(), prepared.tokenizer, record, out)
    if not early or twin.snapshot_of:
        checkpoint.unlink(missing_ok=True)
    print(f"{args.name}: published {out} ({state.tokens:,} tokens, {state.wall_s / 3600:.2f} h of training"
          + (f"; {twin.snapshot_of}'s weights at step {state.step}" if twin.snapshot_of else
             f"; stopped early at step {state.step} of {plan['steps']}, resume state kept: {checkpoint}" if early
             else "") + ")")
    return 0


def portable(path, out=None) -> str:
    """A path as a committed record holds it: relative to the results root where it lies inside it (the resume and
    snapshot folders travel with the repository; this machine's checkout path does not)."""
    from .. import config

    root, path = config.results_root(out).resolve(), Path(path).resolve()
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _stopped_early(twin, plan: dict, state, checkpoint: Path, weights_from: str) -> dict:
    stop = {"at_step": state.step, "planned_steps": plan["steps"],
            "completed_share": round(state.step / plan["steps"], 4),
            "not_reached": "the rest of the learning-rate decay" + (
                f" and all {plan['long_steps']} steps of 512-token sequences (position embeddings past 128 are "
                "barely trained)" if state.step <= plan["tiny_steps"] + plan["short_steps"] else ""),
            "resume_state": str(checkpoint)}
    if twin.snapshot_of:  # another run's weights: that run goes on, this one is never resumed
        stop.update(snapshot_of=twin.snapshot_of, resume_state=None, weights_from=weights_from)
    return stop


def _resume_source(args) -> Path:
    """The weights this run resumes (or a snapshot is published) from: --resume-weights, else the committed folder."""
    return Path(args.resume_weights) if args.resume_weights else resume_folder(args.name, args.out)


def resume_folder(name: str, out=None) -> Path:
    """The committed weights a run resumes from on a machine without its checkpoint; for a snapshot
    (`Pretrained.snapshot_of`), the committed weights of its run at its step, which it is published from."""
    from .. import config

    model = PRETRAINED.get(name)
    if model is not None and model.snapshot_of:
        return snapshot_folder(model.snapshot_of, model.at_step, out)
    return config.results_root(out) / "pretrain-resume" / name


def snapshot_folder(name: str, step: int, out=None) -> Path:
    """Where a session commits run `name`'s weights at schedule step `step` (`snapshot_steps`)."""
    from .. import config

    return config.results_root(out) / "pretrain-snapshots" / f"{name}.step{step}"


def export_resume(checkpoint: Path, folder: Path, build, tokenizer, trained_only: bool = False) -> int:
    """The checkpoint's weights, tokenizer and run state as `loop.save_weights` writes them (what is committed):
    one export for the twins and for the encoders continued from a base (`berteval.derive.continued`, which
    commits only what trains: `trained_only`). `build()` makes the model the run trains, in its shape (its
    weights are then the checkpoint's); every file stays under the committed-file limit."""
    import torch

    from . import loop

    if not checkpoint.is_file():
        raise BertevalError(f"no checkpoint to export at {checkpoint}: has this run started on this machine?")
    payload = torch.load(checkpoint, weights_only=False, map_location="cpu")
    model = build()
    model.load_state_dict(payload["model"])
    state = loop.RunState(**payload["state"])
    loop.save_weights(folder, model, state, tokenizer, trained_only=trained_only)
    sizes = {p.name: p.stat().st_size for p in folder.iterdir()}
    if too_big := [f"{name} ({size:,} bytes)" for name, size in sizes.items() if size > MAX_FILE_BYTES]:
        raise BertevalError(f"{folder}: over the committed-file limit of {MAX_FILE_BYTES:,} bytes: "
                            f"{', '.join(too_big)}")
    print(f"{folder}: weights at step {state.step} ({state.tokens:,} tokens), {sum(sizes.values()) / 1e6:.1f} MB")
    return 0


def _record(args, twin, hyper, plan, prepared, state, final, device, wall) -> dict:
    from .. import devices, provenance

    losses = state.losses
    return {
        "schema": 1, "name": twin.name, "model_id": twin.model_id, "summary": twin.summary,
        "objective": ("masked LM (15% of WordPiece tokens: 80% [MASK], 10% random, 10% unchanged) + next-sentence "
                      "prediction through the pooler" if twin.nsp else
                      "masked LM only (15%: 80/10/10); the NSP loss removed, pooler and NSP head left as initialised"),
        "nsp_trained": twin.nsp,
        "command": "python -m berteval " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        "seed": args.seed, "dtype": args.dtype, "device": devices.describe(device),
        "hyperparameters": {**hyper, **({"vocab": portable(hyper["vocab"], args.out)} if hyper.get("vocab") else {})},
        "schedule": plan,
        "examples": {"prepared": prepared.folder.name, **prepared.record},
        "training": {"steps": state.step, "tokens_seen": state.tokens, "sequences_seen": state.sequences,
                     "train_wall_s": round(state.wall_s, 1), "resumed_at_steps": state.resumed_at,
                     "segments": state.segments,
                     "first_loss": losses[0][0] if losses else None, "last_100_loss": round(
                         sum(r[0] for r in losses[-100:]) / max(1, len(losses[-100:])), 4),
                     "loss_columns": ["loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy"],
                     "loss_curve": _curve(losses)},
        "evaluations": state.evals, "final": final,
        "wall_s": round(wall, 1), "versions": provenance.versions(), "git_commit": provenance.git_commit(),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def _curve(losses: list, points: int = 100) -> dict:
    """Means of the per-step values over `points` equal slices of the steps."""
    import numpy as np

    if not losses:
        return {}
    arr = np.asarray(losses, dtype=np.float64)
    edges = np.linspace(0, len(arr), min(points, len(arr)) + 1).astype(int)
    cols = ["loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy"]
    out = {"step": [int(e) for e in edges[1:]]}
    for j, c in enumerate(cols):
        out[c] = [round(float(arr[a:b, j].mean()), 4) for a, b in zip(edges[:-1], edges[1:])]
    return out


def publish(model, tokenizer, record: dict, out: Path) -> None:
    """The standard checkpoint folder, staged beside `out` and swapped in when complete."""
    from . import card as model_card  # one model card for every encoder pre-trained here

    stage = out.with_name(out.name + ".partial")
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    try:
        model.save_pretrained(str(stage), max_shard_size=SHARD)
        tokenizer.save_pretrained(str(stage))
        files = {}
        for path in sorted(stage.iterdir()):
            size = path.stat().st_size
            if size > MAX_FILE_BYTES:
                raise BertevalError(f"{path.name} is {size:,} bytes: committed files must stay under 9 MB")
            from .wikipedia import file_sha256

            files[path.name] = {"bytes": size, "sha256": file_sha256(path)}
        record["files"] = files
        (stage / RECORD).write_text(json.dumps(record, indent=1) + "\n")
        (stage / "README.md").write_text(model_card.render(record))
        old = out.with_name(out.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if out.exists():
            os.replace(out, old)
        os.replace(stage, out)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
