"""Pre-training BERT from scratch: masked LM + next-sentence prediction (or masked LM alone).

Written from the BERT paper (Devlin et al. 2019, Section 3.1 and Appendix A), not from its
code. The examples are `pretrain_data`'s (one prepared folder for both twins); the model is
`transformers.BertForPreTraining` in the shape given by the hyper-parameters (BERT-Mini:
4 layers, hidden 256, 4 heads, intermediate 1024; Turc et al. 2019), initialised by
transformers under `torch.manual_seed(seed)`: the twins start from identical weights.

The step (`Objective`): the encoder over the batch, the MLM head only at the masked
positions (about 15% of tokens: the same loss as scoring every position, at a fraction of
the 16 k-wide vocabulary projection), the NSP head on `pooler_output`; loss = mean masked
cross-entropy (+ NSP cross-entropy when the twin trains NSP). The no-NSP twin's pooler and
NSP head get no gradient and are excluded from the optimiser (so weight decay does not
touch them either): they stay exactly as initialised, the control. bf16 autocast where
asked (fp32 master weights and optimiser state).

Schedule: AdamW (betas, weight decay 0.01 except biases and LayerNorm), linear warm-up then
linear decay to 0, clipping at 1.0. Three phases at about the same tokens per step: 32-token
pairs for the first `tiny_share` of the steps, 128 tokens (BERT's first phase) for most, 512
for the last `long_share` (BERT: 10%). The 32-token phase is ours, not BERT's: on 128 tokens
a small model sits for tens of millions of tokens on the unigram plateau (attention to a
neighbour starts at 1/128 of a head and its value is 1/128 of what a head reads); on 32 the
same model leaves it within a few million and keeps what it learned when the pairs grow
(docs/findings/pretraining.md measures both). The batch order is one seeded permutation per length, identical for both
twins. Every `eval_every` steps: held-out MLM accuracy and loss, NSP accuracy on held-out
segment pairs, on held-out sentence pairs and on the NSP dev sentence pairs (fixed
subsets; all of each at the end).

Resumable: every `checkpoint_every` steps the weights, optimiser, schedule, RNG state,
step, counters and curves are written to one file (temp file, fsync, rename); a killed
run restarts from there and ends with the weights and record it would have had. This loop
is separate from `berteval.training` (the heads' loop) because pre-training needs a token
budget over two sequence lengths, periodic held-out evaluation inside the run and a
lean step (bench: `python -m berteval bench --sections pretrain`).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..errors import BertevalError
from ..seeds import numpy_rng
from . import examples

EVAL_SUBSET = 1024  # examples of each evaluation set scored during training (all of them at the end)


# -- model and step -----------------------------------------------------------------------------------------------

def bert_config(hyper: dict, vocab_size: int):
    from transformers import BertConfig

    return BertConfig(vocab_size=vocab_size, hidden_size=hyper["hidden_size"],
                      num_hidden_layers=hyper["layers"], num_attention_heads=hyper["heads"],
                      intermediate_size=hyper["intermediate_size"], max_position_embeddings=examples.LONG,
                      type_vocab_size=2, pad_token_id=0, hidden_dropout_prob=0.1,
                      attention_probs_dropout_prob=0.1, architectures=["BertForPreTraining"])


def build_model(hyper: dict, vocab_size: int, seed: int, counts: np.ndarray | None = None) -> torch.nn.Module:
    """BertForPreTraining with transformers' initialisation under `seed` (SDPA attention).

    With `hyper["mlm_bias_init"] == "log-unigram"` the masked-LM output bias (tied to the decoder's) starts at the
    log frequency of each token among the training targets (`counts`, from `target_counts`), centred; transformers starts it at
    zero. Why: from a zero bias the first thing the model learns is the unigram distribution, and it learns it
    by writing one shared "frequent tokens" direction into every position's state; the states then look alike,
    attention has nothing to tell apart, its heads settle on [CLS]/[SEP] and the model sits on the unigram
    plateau (the first twins: 26 M tokens with no use of context at all). Starting the bias at the unigram removes
    that pressure; the architecture and the checkpoint format are unchanged (docs/findings/pretraining.md)."""
    from transformers import BertForPreTraining

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = BertForPreTraining._from_config(bert_config(hyper, vocab_size), attn_implementation="sdpa")
    init = hyper.get("mlm_bias_init", "zero")
    if init == "log-unigram":
        if counts is None or len(counts) != vocab_size:
            raise BertevalError("mlm_bias_init log-unigram needs the training targets' counts over the vocabulary")
        logp = np.log((counts.astype(np.float64) + 1.0) / (counts.sum() + vocab_size))
        with torch.no_grad():
            model.cls.predictions.bias.copy_(torch.from_numpy(logp - logp.mean()).float())
    elif init != "zero":
        raise BertevalError(f"mlm_bias_init {init!r}: zero or log-unigram")
    return model


def target_counts(seqs: examples.Sequences, vocab_size: int) -> np.ndarray:
    """How often each token is a masked-LM target in `seqs` (the training sequences): the log-unigram prior."""
    return np.bincount(seqs.mlm_tgt[seqs.mlm_pos >= 0].astype(np.int64), minlength=vocab_size)


def batch_tensors(seqs: examples.Sequences, index: np.ndarray, device) -> dict:
    """Model inputs for rows `index`, padded to their longest: ids, segments, mask, masked positions/targets."""
    sub = seqs.take(np.asarray(index))
    width = int(sub.length.max())
    ids = torch.from_numpy(sub.ids[:, :width].astype(np.int64))
    pos = torch.arange(width)
    length = torch.from_numpy(sub.length.astype(np.int64))
    attention = pos[None, :] < length[:, None]  # (B, T)
    segment = (pos[None, :] >= torch.from_numpy(sub.a_len.astype(np.int64))[:, None] + 2) & attention
    mp = torch.from_numpy(sub.mlm_pos.astype(np.int64))
    valid = mp >= 0
    rows = torch.arange(len(index))[:, None].expand_as(mp)[valid]
    out = {"input_ids": ids, "token_type_ids": segment.long(), "attention_mask": attention.long(),
           "mlm_rows": rows, "mlm_cols": mp[valid], "mlm_targets": torch.from_numpy(
               sub.mlm_tgt.astype(np.int64))[valid], "nsp_labels": torch.from_numpy(sub.nsp.astype(np.int64))}
    return {k: v.to(device, non_blocking=True) for k, v in out.items()}


class Objective(torch.nn.Module):
    """BERT's pre-training loss on a BertForPreTraining, MLM logits only at the masked positions."""

    def __init__(self, model: torch.nn.Module, nsp: bool):
        super().__init__()
        self.model, self.nsp = model, nsp

    def forward(self, input_ids, token_type_ids, attention_mask, mlm_rows, mlm_cols, mlm_targets, nsp_labels):
        inner = self.model
        out = inner.bert(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask)
        hidden = out.last_hidden_state[mlm_rows, mlm_cols]  # (M, H): the masked positions only
        mlm_logits = inner.cls.predictions(hidden)  # (M, V)
        mlm_loss = torch.nn.functional.cross_entropy(mlm_logits.float(), mlm_targets)
        nsp_logits = inner.cls.seq_relationship(out.pooler_output)  # (B, 2)
        nsp_loss = torch.nn.functional.cross_entropy(nsp_logits.float(), nsp_labels)
        loss = mlm_loss + nsp_loss if self.nsp else mlm_loss
        return {"loss": loss, "mlm_loss": mlm_loss.detach(), "nsp_loss": nsp_loss.detach(),
                "mlm_correct": (mlm_logits.argmax(-1) == mlm_targets).sum().detach(),
                "mlm_count": mlm_targets.numel(),
                "nsp_correct": (nsp_logits.argmax(-1) == nsp_labels).sum().detach()}


def train_step(objective, batch: dict, params, opt, sched, device, dtype: str, max_grad_norm: float) -> dict:
    """One optimiser step of the pre-training loss on `batch` (clipped, scheduled): the objective's outputs."""
    with _autocast(device, dtype):
        out = objective(**batch)
    out["loss"].backward()
    torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)
    return out


def _autocast(device, dtype: str):
    if dtype == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return torch.autocast(device.type, enabled=False)


def _optimiser(model: torch.nn.Module, hyper: dict, total: int, nsp: bool):
    frozen = () if nsp else ("bert.pooler.", "cls.seq_relationship.")
    # A parameter already frozen by the caller stays frozen (a continued run from a base model freezes its
    # embeddings or trains LoRA only: berteval.derive.continued); a model built here has every one trainable.
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad and not n.startswith(frozen)]
    for n, p in model.named_parameters():
        if n.startswith(frozen):
            p.requires_grad_(False)
    decay = [p for n, p in named if p.ndim >= 2]
    no_decay = [p for n, p in named if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": hyper["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}], lr=hyper["lr"],
                            betas=(hyper["beta1"], hyper["beta2"]), eps=1e-6)
    warm = int(hyper["warmup_steps"])
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / max(1, warm) if s < warm else max(0.0, (total - s) / max(1, total - warm)))
    return [p for _, p in named], opt, sched


# -- evaluation ---------------------------------------------------------------------------------------------------

@torch.no_grad()
def evaluate_sequences(model, seqs: examples.Sequences, device, dtype: str, limit: int | None = None,
                       batch: int = 64) -> dict:
    """Held-out masked-LM accuracy/loss and NSP accuracy on segment pairs (dropout off)."""
    n = len(seqs) if limit is None else min(limit, len(seqs))
    objective = Objective(model, True)
    was = model.training
    model.eval()
    correct = count = nsp_correct = 0
    loss_sum = 0.0
    for i in range(0, n, batch):
        b = batch_tensors(seqs, np.arange(i, min(n, i + batch)), device)
        with _autocast(device, dtype):
            out = objective(**b)
        correct += int(out["mlm_correct"])
        count += int(out["mlm_count"])
        loss_sum += float(out["mlm_loss"]) * int(out["mlm_count"])
        nsp_correct += int(out["nsp_correct"])
    model.train(was)
    return {"n": n, "mlm_accuracy": round(correct / max(1, count), 4), "mlm_loss": round(loss_sum / max(1, count), 4),
            "nsp_accuracy": round(nsp_correct / max(1, n), 4)}


@torch.no_grad()
def nsp_on_pairs(model, tokenizer, pairs: list[tuple[str, str, int]], device, dtype: str,
                 limit: int | None = None, batch: int = 64) -> dict:
    """The NSP head's accuracy on sentence pairs (text A, text B, label) encoded as BERT encodes a pair."""
    rows = pairs if limit is None else pairs[:limit]
    was = model.training
    model.eval()
    correct = 0
    for i in range(0, len(rows), batch):
        part = rows[i : i + batch]
        enc = tokenizer([a for a, _, _ in part], [b for _, b, _ in part], truncation=True,
                        max_length=examples.SHORT, padding=True, return_tensors="pt")
        enc = {k: v.to(device) for k, v in enc.items()}
        with _autocast(device, dtype):
            logits = model(**enc).seq_relationship_logits
        labels = torch.tensor([y for _, _, y in part], device=device)
        correct += int((logits.argmax(-1) == labels).sum())
    model.train(was)
    return {"n": len(rows), "nsp_accuracy": round(correct / max(1, len(rows)), 4)}


def nsp_dev_pairs(data_dir: Path) -> list[tuple[str, str, int]]:
    """The 8,118 NSP dev sentence pairs of `berteval.tasks.nsp` (SQuAD v1.1 dev articles, pysbd, seed 0)."""
    from .. import nsp_pairs as pairs
    from ..tasks.nsp import PAIR_SEED
    from . import wikipedia

    built, _ = pairs.build_pairs(wikipedia.dev_articles(data_dir), PAIR_SEED)
    return [(p.a, p.b, p.label) for p in built]


# -- the run ------------------------------------------------------------------------------------------------------

@dataclass
class RunState:
    step: int = 0
    tokens: int = 0
    sequences: int = 0
    wall_s: float = 0.0
    losses: list = None  # per step: [loss, mlm_loss, nsp_loss, mlm_acc, nsp_acc]
    evals: list = None  # one row per evaluation
    resumed_at: list = None  # steps at which the run was resumed
    # one row per working session: the step it started at, dtype, device and threads it ran with, and how it
    # resumed ("checkpoint": full state; "weights": the committed weights, Adam's moments restarted)
    segments: list = None

    def __post_init__(self):
        self.losses = self.losses or []
        self.evals = self.evals or []
        self.resumed_at = self.resumed_at or []
        self.segments = self.segments or []


def _save_checkpoint(path: Path, model, opt, sched, state: RunState) -> None:
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    payload = {"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
               "rng": torch.get_rng_state(), "state": state.__dict__}
    with open(tmp, "wb") as fh:
        torch.save(payload, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _load_checkpoint(path: Path, model, opt, sched) -> RunState:
    try:
        payload = torch.load(path, weights_only=False, map_location="cpu")
        model.load_state_dict(payload["model"])
        opt.load_state_dict(payload["optimizer"])
        sched.load_state_dict(payload["scheduler"])
        torch.set_rng_state(payload["rng"])
        return RunState(**payload["state"])
    except Exception as exc:  # noqa: BLE001 - any unreadable checkpoint is reported, not trained over
        raise BertevalError(f"the checkpoint {path} cannot be read ({type(exc).__name__}: {exc}); delete it to "
                            f"start the run again from step 0") from exc


def snapshot_path(checkpoint: Path, step: int) -> Path:
    return checkpoint.with_name(checkpoint.stem + f".step{step}")


def save_weights(folder: Path, model, state: RunState, tokenizer=None, trained_only: bool = False) -> None:
    """The weights alone (fp32 safetensors shards under 9 MB) and the run state, written whole or not at all: a
    snapshot at a given step (the seed comparison) or the small resume state a session commits. Without the
    optimiser's moments, a run resumed from it restarts Adam's averages (`train(..., resume_weights=...)`).
    `trained_only`: only the parameters that train (`requires_grad`), in the same shards and index as a
    checkpoint folder: a model continued from a base (`berteval.derive.continued`) gets its frozen ones from
    the base again, so its resume state is its LoRA adapter and heads, not the whole encoder."""
    import shutil

    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if trained_only:
        from huggingface_hub import save_torch_state_dict

        trained = {n for n, p in model.named_parameters() if p.requires_grad}
        save_torch_state_dict({k: v for k, v in model.state_dict().items() if k in trained}, str(tmp),
                              max_shard_size="9MB")
    else:
        model.save_pretrained(str(tmp), max_shard_size="9MB")
    if tokenizer is not None:  # a new machine rebuilds the very same examples from it (`--vocab`)
        tokenizer.save_pretrained(str(tmp))
    (tmp / "run_state.json").write_text(json.dumps(state.__dict__))
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)


def schedule_plan(hyper: dict) -> dict:
    """Steps per phase, in order: `tiny` (32-token pairs, the plateau breaker), `short` (128, BERT's first phase),
    `long` (512, BERT's last 10%), each at about the same tokens per step. A hyper-parameter set without
    `tiny_share` (older records, the bench) has no tiny phase."""
    total = int(hyper["steps"])
    tiny_steps = int(round(total * hyper.get("tiny_share", 0.0)))
    long_steps = int(round(total * hyper["long_share"]))
    return {"steps": total, "tiny_steps": tiny_steps, "short_steps": total - tiny_steps - long_steps,
            "long_steps": long_steps, "tiny_batch": int(hyper.get("tiny_batch_size", 0)),
            "short_batch": int(hyper["batch_size"]), "long_batch": int(hyper["long_batch_size"])}


def phases(prepared, plan: dict) -> list[tuple[str, object, int, int]]:
    """(name, training sequences, steps, batch) in schedule order, phases with no steps left out."""
    rows = [("tiny", prepared.train_tiny, plan["tiny_steps"], plan["tiny_batch"]),
            ("short", prepared.train, plan["short_steps"], plan["short_batch"]),
            ("long", prepared.train_long, plan["long_steps"], plan["long_batch"])]
    return [r for r in rows if r[2] > 0]


def _orders(prepared, plan: dict, seed: int) -> dict[str, np.ndarray]:
    """The batch order: a seeded permutation per phase (repeated if the budget exceeds one pass). The 128- and
    512-token orders are drawn first, as before the tiny phase existed."""
    rng = numpy_rng(seed, "pretrain")

    def order(n_rows: int, needed: int) -> np.ndarray:
        if n_rows == 0 and needed:
            raise BertevalError("no prepared sequences of this length: prepare again with more text")
        reps = max(1, math.ceil(needed / max(1, n_rows)))
        return np.concatenate([rng.permutation(n_rows) for _ in range(reps)])[:needed]

    out = {"short": order(len(prepared.train), plan["short_steps"] * plan["short_batch"]),
           "long": order(len(prepared.train_long), plan["long_steps"] * plan["long_batch"])}
    if plan["tiny_steps"]:
        if prepared.train_tiny is None:
            raise BertevalError("the schedule has a 32-token phase but the prepared examples have none: "
                                "prepare with --tiny-sequences N")
        out["tiny"] = order(len(prepared.train_tiny), plan["tiny_steps"] * plan["tiny_batch"])
    return out


def _batch_rows(prepared, plan: dict, orders: dict, step: int):
    """The training sequences and row indices of schedule step `step`."""
    start = 0
    for name, seqs, steps, b in phases(prepared, plan):
        if step < start + steps:
            k = step - start
            return seqs, orders[name][k * b : (k + 1) * b]
        start += steps
    raise IndexError(step)


def _resume_from_weights(folder: Path, model, sched, trained_only: bool = False) -> RunState:
    """The committed resume state (`save_weights`): weights and run state; the optimiser starts again from zero
    moments (its state is 2x the weights and not committed), the schedule at the saved step. `trained_only`: the
    folder holds the trained parameters alone (`save_weights(..., trained_only=True)`); the frozen ones stay as
    `model` has them (its base's)."""
    from safetensors.torch import load_file

    index = folder / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.is_file() else [
        "model.safetensors"]
    weights = {}
    for name in files:
        weights.update(load_file(str(folder / name)))
    missing, unexpected = model.load_state_dict(weights, strict=False)
    model.tie_weights()  # the MLM decoder is tied to the word embeddings: saved once, under the embeddings' name
    missing = [k for k in missing if "position_ids" not in k and not k.startswith("cls.predictions.decoder.")]
    if trained_only:
        frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
        missing = [k for k in missing if k not in frozen]
    if missing or unexpected:
        raise BertevalError(f"the resume weights in {folder} do not fit this model (missing {missing[:3]}, "
                            f"unexpected {unexpected[:3]}): delete the folder to start again")
    state = RunState(**json.loads((folder / "run_state.json").read_text()))
    import warnings

    with warnings.catch_warnings():  # the schedule is moved to the step reached, before any optimiser step: meant
        warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step", category=UserWarning)
        for _ in range(state.step):
            sched.step()
    return state


def _start_state(prepared, model, opt, sched, seed: int, dtype: str, checkpoint: Path, resume_weights, describe: str,
                 plan: dict, log, trained_only: bool = False) -> RunState:
    """The run's state at this session's start: resumed from the checkpoint file, else from committed weights,
    else new; this session's row appended to `segments` (what ran when, and how it resumed)."""
    device = next(model.parameters()).device
    state = RunState()
    how = "start"
    if checkpoint.is_file():
        state = _load_checkpoint(checkpoint, model, opt, sched)
        how = "checkpoint"
    elif resume_weights is not None and (resume_weights / "run_state.json").is_file():
        state = _resume_from_weights(resume_weights, model, sched, trained_only)
        how = "weights"
    else:
        torch.manual_seed(int(seed))  # dropout's stream: the same for both twins (their heads use none)
    vocab_sha = prepared.record.get("vocabulary", {}).get("vocab_sha256")
    if how != "start":
        if state.segments and vocab_sha and state.segments[0].get("vocab_sha256") not in (None, vocab_sha):
            raise BertevalError(f"the run's resume state was trained with another vocabulary than these examples' "
                                f"({state.segments[0]['vocab_sha256'][:12]} vs {vocab_sha[:12]}): prepare with "
                                f"--vocab <the committed resume folder> so the token ids mean the same")
        state.resumed_at.append(state.step)
        log(f"resumed from its {how} at step {state.step} of {plan['steps']} ({state.tokens:,} tokens seen)")
    state.segments.append({"from_step": state.step, "from_tokens": state.tokens, "resumed_from": how,
                           "vocab_sha256": vocab_sha, "examples": prepared.folder.name,
                           "dtype": dtype, "device": describe or str(device),
                           "threads": torch.get_num_threads(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                        time.gmtime())})
    return state


def train(prepared, nsp: bool, hyper: dict, seed: int, device, dtype: str, checkpoint: Path,
          dev_pairs: list, stop_after_steps: int | None = None, log=print, progress_file: Path | None = None,
          stop_at_step: int | None = None, resume_weights: Path | None = None, describe: str = "", model=None,
          resume_trained_only: bool = False):
    """Run (or resume) the pre-training; returns (model, RunState, complete). `stop_at_step` ends the run at that
    step of its schedule (saved there, the schedule unchanged, so it can still be resumed to the end). Without a
    checkpoint file, `resume_weights` (a folder `save_weights` wrote, e.g. committed by an earlier session on a
    machine since lost) resumes from its weights and step. `model`: a BertForPreTraining to continue (its
    frozen parameters stay frozen) instead of a new one built from `hyper`; `resume_trained_only`: its
    `resume_weights` hold the trained parameters alone (the frozen ones are `model`'s)."""
    plan = schedule_plan(hyper)
    vocab = len(prepared.tokenizer)
    if model is None:
        model = build_model(hyper, vocab, seed, target_counts(prepared.train, vocab))
    model = model.to(device)
    if hyper.get("pretrain_dropout") is not None:
        # Dropout off (or changed) for pre-training only: one pass over the text leaves nothing to overfit
        # (Cramming, 2022); the config keeps BERT's 0.1, so a fine-tune of the saved model uses dropout as usual.
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = float(hyper["pretrain_dropout"])
    params, opt, sched = _optimiser(model, hyper, plan["steps"], nsp)
    state = _start_state(prepared, model, opt, sched, seed, dtype, checkpoint, resume_weights, describe, plan, log,
                         resume_trained_only)
    orders = _orders(prepared, plan, seed)
    objective = Objective(model, nsp)
    model.train()
    started = time.perf_counter()
    wall0 = state.wall_s
    stopped_after = state.step
    while state.step < plan["steps"]:
        if stop_at_step is not None and state.step >= stop_at_step:
            if state.step > stop_at_step:
                raise BertevalError(f"the checkpoint is at step {state.step}, past --publish-at-step {stop_at_step}")
            _save_checkpoint(checkpoint, model, opt, sched, state)
            model.eval()
            return model, state, False
        seqs, index = _batch_rows(prepared, plan, orders, state.step)
        batch = batch_tensors(seqs, index, device)
        out = train_step(objective, batch, params, opt, sched, device, dtype, hyper["max_grad_norm"])
        state.step += 1
        state.tokens += int(batch["attention_mask"].sum())
        state.sequences += len(index)
        state.losses.append([round(float(out["loss"].detach()), 4), round(float(out["mlm_loss"]), 4),
                             round(float(out["nsp_loss"]), 4),
                             round(int(out["mlm_correct"]) / max(1, int(out["mlm_count"])), 4),
                             round(int(out["nsp_correct"]) / len(index), 4)])
        state.wall_s = wall0 + time.perf_counter() - started
        last = state.step == plan["steps"]
        if state.step % hyper["eval_every"] == 0 and not last:
            row = evaluation_row(model, prepared, dev_pairs, device, dtype, state, EVAL_SUBSET)
            state.evals.append(row)
            log(_eval_line(row, plan))
            if progress_file is not None:
                with open(progress_file, "a") as fh:
                    fh.write(json.dumps(row) + "\n")
        if state.step % hyper["checkpoint_every"] == 0 and not last:
            _save_checkpoint(checkpoint, model, opt, sched, state)
        if state.step in hyper.get("snapshot_steps", ()):
            save_weights(snapshot_path(checkpoint, state.step), model, state, prepared.tokenizer)
        if stop_after_steps is not None and state.step - stopped_after >= stop_after_steps and not last:
            _save_checkpoint(checkpoint, model, opt, sched, state)
            return model, state, False
    model.eval()
    return model, state, True


def evaluation_row(model, prepared, dev_pairs, device, dtype, state: RunState, limit: int | None) -> dict:
    t0 = time.perf_counter()
    recent = np.array(state.losses[-max(1, min(len(state.losses), 100)):], dtype=np.float64)
    row = {"step": state.step, "tokens": state.tokens, "wall_s": round(state.wall_s, 1),
           "train_loss_last100": round(float(recent[:, 0].mean()), 4),
           "train_mlm_loss_last100": round(float(recent[:, 1].mean()), 4),
           "train_nsp_loss_last100": round(float(recent[:, 2].mean()), 4),
           "heldout": evaluate_sequences(model, prepared.heldout, device, dtype, limit),
           "heldout_sentence_pairs": nsp_on_pairs(model, prepared.tokenizer, prepared.heldout_pairs, device, dtype,
                                                  limit),
           "nsp_dev_pairs": nsp_on_pairs(model, prepared.tokenizer, dev_pairs, device, dtype, limit)}
    if limit is None:
        row["heldout_512"] = evaluate_sequences(model, prepared.heldout_long, device, dtype, None, batch=16)
    row["eval_s"] = round(time.perf_counter() - t0, 1)
    return row


def _eval_line(row: dict, plan: dict) -> str:
    return (f"step {row['step']}/{plan['steps']} tokens {row['tokens'] / 1e6:.2f} M  train loss "
            f"{row['train_loss_last100']} (mlm {row['train_mlm_loss_last100']})  held-out mlm acc "
            f"{row['heldout']['mlm_accuracy']} loss {row['heldout']['mlm_loss']}  nsp: segments "
            f"{row['heldout']['nsp_accuracy']} sentences {row['heldout_sentence_pairs']['nsp_accuracy']} dev "
            f"{row['nsp_dev_pairs']['nsp_accuracy']}  ({row['wall_s']:.0f} s)")
