"""`<base>+mlm-nsp-wiki` and `<base>+mlm-wiki`: a base encoder continued on the twins' Wikipedia text.

Issue 43's pair of derived twins: the same start (the base checkpoint, its missing MLM and NSP heads
initialised under the seed), the same prepared examples (`pretrain_data.prepare` on Wikipedia minus the
SQuAD dev articles and the NSP-dev-sentence articles, 1% held out, cue-free NSP pairs with their audit)
tokenised with the BASE's own WordPiece vocabulary (`vocab.reuse` of the base folder: a continued encoder
must read the ids its embeddings were trained on), the same batch order and steps. One difference: the
NSP twin adds the NSP cross-entropy; the MLM twin's pooler and NSP head get no gradient and are left out of
the optimiser, so they stay exactly as initialised (the control), as in the scratch twins.

The loop is the scratch twins' (`pretrain.train`: checkpoints every `checkpoint_every` steps, a killed run
resumes to the same weights, held-out evaluation inside the run, curves); only the model differs. So is the way
a run spans sessions: `--export-resume` writes what trains (LoRA adapter and heads, or the encoder's layers and
heads), the tokenizer and the run state to `<out>/pretrain-resume/<name>/` (the twins' `export_resume`, every
file under 9 MB); a machine without the cache's checkpoint resumes from that folder (`--resume-weights`), the
frozen weights rebuilt from the base, only Adam's moments lost, and `segments` says so. Two ways
to train it (`tuning`), so short runs can choose:
- `lora`: LoRA (rank `rank`) on every encoder linear layer, plus the MLM transform/bias (and, for the NSP
  twin, the pooler and NSP head) in full; embeddings and the tied decoder frozen. Cheap steps, small
  artifacts (adapter ~2.7 MB at rank 16), merged into the weights at load time.
- `full`: every encoder layer's weights, embeddings (and so the tied decoder) still frozen: the decoder is
  the 30,522 x 384 embedding matrix, and freezing it keeps the two modes' heads comparable and every
  artifact under the 5 MiB limit (each layer's tensors are written in shards, `_save_full`).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import torch

from .. import models
from ..errors import BertevalError
from ..models import derived
from .base import Context, Outcome

LORA_TARGETS = (r".*encoder\.layer\.\d+\.(attention\.self\.(query|key|value)|attention\.output\.dense"
                r"|intermediate\.dense|output\.dense)")
HEAD_PREFIXES = ("cls.predictions.transform.", "cls.predictions.bias", "bert.pooler.", "cls.seq_relationship.")
SHARD_BYTES = 4 * 1024 * 1024  # under artifacts.MAX_BYTES with room for the safetensors header


def base_model(base_path: str, seed: int, hyper: dict) -> torch.nn.Module:
    """BertForPreTraining from the base (heads it lacks initialised under `seed`), with exactly what `tuning`
    trains left trainable (the NSP twin's pooler/NSP head freezing is `pretrain._optimiser`'s)."""
    from transformers import BertForPreTraining

    tuning = hyper["tuning"]
    if tuning not in ("lora", "full"):
        raise BertevalError(f"--tuning {tuning!r}: lora (a LoRA adapter) or full (every encoder weight)")
    # One seeded stream for the fresh heads and LoRA's A matrices: both twins, and a run and its resumed
    # self, start from the very same weights whatever ran before in the process.
    with models.quiet_loader(), derived.CONSTRUCTION, torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = BertForPreTraining.from_pretrained(base_path, local_files_only=True, attn_implementation="sdpa")
        if tuning == "lora":
            model = _with_lora(model, hyper)
    for name, param in model.named_parameters():
        trainable = name.startswith(HEAD_PREFIXES) or ("lora_" in name if tuning == "lora"
                                                       else name.startswith("bert.encoder."))
        param.requires_grad_(trainable and "decoder" not in name)
    return model


def _with_lora(model, hyper: dict):
    """The model with LoRA layers injected in place (the BertForPreTraining itself, not peft's wrapper: the
    loop calls `model.bert` and `model.cls`)."""
    from peft import LoraConfig, get_peft_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # peft asks transformers a deprecated question
        lora = LoraConfig(r=hyper["rank"], lora_alpha=hyper["alpha"], lora_dropout=hyper["lora_dropout"],
                          target_modules=LORA_TARGETS)
        peft_model = get_peft_model(model, lora)
    inner = peft_model.get_base_model()
    # Saving the adapter goes through peft (its file format); kept as a plain attribute, not a submodule (the
    # wrapper holds the model: registering it back would make a cycle that .to() and state_dict() recurse into).
    object.__setattr__(inner, "_berteval_peft", peft_model)
    return inner


def examples(ctx: Context, base_path: str, log):
    """The prepared examples (cached and verified), with the base's own vocabulary."""
    from .. import config
    from ..pretrain import examples as pretrain_examples

    hyper = {**ctx.hyper, "vocab": base_path}
    return pretrain_examples.prepare(Path(ctx.data_dir), config.cache_dir(), ctx.seed, hyper, log=log)


def run(ctx: Context, stage: Path, nsp: bool) -> Outcome:
    """Train (or resume) one twin; on completion write its artifacts into `stage`."""
    from .. import devices
    from ..pretrain import loop

    base = models.identify(ctx.spec.base)
    log = print if ctx.progress else (lambda *a, **k: None)
    prepared = examples(ctx, base.path, log)
    device = devices.current()
    model = base_model(base.path, ctx.seed, ctx.hyper)
    ckpt_dir = ctx.checkpoint_dir(base.revision, prepared.folder.name, spans_sessions=True)
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    dev_pairs = loop.nsp_dev_pairs(Path(ctx.data_dir))
    model, state, complete = loop.train(prepared, nsp, ctx.hyper, ctx.seed, device, ctx.dtype,
                                            ckpt_dir / "run.pt", dev_pairs, stop_after_steps=ctx.stop_after_steps,
                                            log=log, describe=devices.describe(device), model=model,
                                            resume_weights=resume_folder(ctx), resume_trained_only=True)
    total = int(ctx.hyper["steps"])
    if not complete:
        return Outcome(False, state.step, total, checkpoint=ckpt_dir)
    final = loop.evaluation_row(model, prepared, dev_pairs, device, ctx.dtype, state, None)
    tensors = save(model, stage, base.model_id, ctx.hyper["tuning"])
    record = {"examples": {"prepared": prepared.folder.name, **prepared.record},
              "cue_audit": cue_audits(prepared.record), "training": training_record(state, model, ctx.hyper),
              "final": final, "evaluations": state.evals}
    if nsp:  # what the head learned, by editing B's surface only (the twins' test: berteval.pretrain.edits)
        from ..pretrain import edits

        record["deletion_test"] = edits.record(model, prepared.tokenizer, dev_pairs)
    # The checkpoint folder goes once the artifacts are published (derive's cli), so --force starts afresh; a
    # committed resume folder is the user's to delete (git rm), or --force would resume from it.
    if (resume_folder(ctx) / "run_state.json").is_file():
        print(f"note: the run is complete; its resume state {resume_folder(ctx)} is no longer needed (delete it, or "
              f"--force resumes from it)", file=sys.stderr)
    return Outcome(True, state.step, total, record, tensors, ckpt_dir)


def resume_folder(ctx: Context) -> Path:
    """Where the run's committed resume state is written and read: `--resume-weights`, else the twins' place
    for it, `<out>/pretrain-resume/<name>/`."""
    from ..pretrain.command import resume_folder as default_folder

    return Path(ctx.resume_weights) if ctx.resume_weights else default_folder(ctx.spec.folder_name, ctx.out)


def export(ctx: Context) -> int:
    """`--export-resume`: this machine's checkpoint of the run as a small folder to commit (what trains, the
    tokenizer, the run state; no optimiser state), written by the twins' export."""
    from ..pretrain.command import export_resume

    base = models.identify(ctx.spec.base)
    prepared = examples(ctx, base.path, print if ctx.progress else (lambda *a, **k: None))
    checkpoint = ctx.checkpoint_dir(base.revision, prepared.folder.name, spans_sessions=True) / "run.pt"
    return export_resume(checkpoint, resume_folder(ctx), lambda: base_model(base.path, ctx.seed, ctx.hyper),
                         prepared.tokenizer, trained_only=True)


def cue_audits(record: dict) -> dict:
    """Each training set's cue audit, by set name (128-token passes listed one by one)."""
    out = {}
    for name, rec in record.get("sequences", {}).items():
        for k, part in enumerate(rec.get("passes", [rec])):
            out[name if "passes" not in rec else f"{name}_pass{k + 1}"] = part.get("cue_audit")
    return out


def training_record(state, model, hyper: dict) -> dict:
    """Tokens seen, per-step curves and what trained: the part of derivation.json that says how it went."""
    from ..pretrain.command import _curve

    losses = state.losses
    return {"steps": state.step, "tokens_seen": state.tokens, "sequences_seen": state.sequences,
            "wall_s": round(state.wall_s, 1), "resumed_at_steps": state.resumed_at, "segments": state.segments,
            "tuning": hyper["tuning"],
            "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
            "first_loss": losses[0] if losses else None, "loss_curve": _curve(losses)}


def save(model, stage: Path, base_model_id: str, tuning: str) -> dict[str, torch.Tensor]:
    """heads.safetensors (pooler, NSP head, MLM transform/bias) and the encoder's change: the LoRA adapter
    (peft's files) or the full layers' weights in shards under 4 MiB."""
    from safetensors.torch import save_file

    from ..models.base import save_peft

    state = model.state_dict()
    heads = {k: state[k].detach().contiguous().clone() for k in (*derived.POOLER_KEYS, *derived.NSP_KEYS,
                                                                 *derived.MLM_KEYS)}
    save_file(heads, str(stage / derived.HEADS_FILE))
    if tuning == "lora":
        save_peft(model._berteval_peft, stage, base_model_id)
        return {**heads, **{f"lora:{k}": v.detach().clone() for k, v in state.items() if "lora_" in k}}
    encoder = {k: v.detach().contiguous().clone() for k, v in state.items() if k.startswith("bert.encoder.")}
    _save_full(encoder, stage)
    return {**heads, **encoder}


def _save_full(tensors: dict[str, torch.Tensor], stage: Path) -> None:
    """Greedy shards in key order, each under SHARD_BYTES (one 384 x 1536 fp32 matrix is 2.25 MiB)."""
    from safetensors.torch import save_file

    shard, size, k = {}, 0, 0
    for key in sorted(tensors):
        nbytes = tensors[key].numel() * tensors[key].element_size()
        if shard and size + nbytes > SHARD_BYTES:
            save_file(shard, str(stage / f"{derived.ENCODER_SHARD}{k:03d}.safetensors"))
            shard, size, k = {}, 0, k + 1
        shard[key], size = tensors[key], size + nbytes
    if shard:
        save_file(shard, str(stage / f"{derived.ENCODER_SHARD}{k:03d}.safetensors"))
