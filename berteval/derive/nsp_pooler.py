"""`<base>+nsp-pooler`: the base encoder frozen; BERT's pooler (dense + tanh over h_[CLS])
and an NSP head on it (`cls.seq_relationship`, Linear(hidden, 2), index 0 = IsNext)
trained by next-sentence prediction on BERT-style segment pairs of the training text.

The encoder never changes, so the last-layer [CLS] state of every pair is computed once
(and cached) and only pooler + head train on those vectors: minutes on 2 CPU cores
instead of a forward pass per step. The pooler starts from the base checkpoint's pooler
weights (all-MiniLM-L6-v2's were never trained: an initialisation), the head from
transformers' initialisation of the missing `cls.seq_relationship` under the run's seed.
The result answers "what does NSP training alone do to pooler_output?" on an unchanged
encoder. Artifact: `heads.safetensors` (the four tensors, about 0.6 MB).
"""

from __future__ import annotations

import copy
import hashlib
import io
import sys
import time
from pathlib import Path

import numpy as np
import torch

from .. import config, models, training
from ..models import derived
from ..store import write_atomic
from .base import Context, Outcome
from .examples import segment_pairs
from .steplog import StepLog


class PoolerNSP(torch.nn.Module):
    """pooler (dense + tanh) then the NSP head, reading precomputed [CLS] states."""

    def __init__(self, pooler: torch.nn.Module, head: torch.nn.Module):
        super().__init__()
        self.pooler, self.seq_relationship = pooler, head

    def forward(self, cls_states: torch.Tensor) -> torch.Tensor:  # (B, H) -> (B, 2)
        return self.seq_relationship(self.pooler(cls_states[:, None, :]))


def base_nsp_model(base_path: str, seed: int) -> torch.nn.Module:
    """The base as *ForNextSentencePrediction; the head it lacks initialised by transformers under `seed`."""
    from transformers import AutoModelForNextSentencePrediction

    with models.quiet_loader(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = AutoModelForNextSentencePrediction.from_pretrained(base_path, local_files_only=True)
    return model.eval()


@torch.inference_mode()
def cls_states(encoder, instances, tokenizer, batch_size: int = 64, progress: bool = True) -> torch.Tensor:
    """(N, H) last-layer [CLS] state of each pair's [CLS] A [SEP] B [SEP], in instance order."""
    from tqdm.auto import tqdm

    from ..pretrain.segments import encode

    encoded = [encode(x, tokenizer.cls_token_id, tokenizer.sep_token_id) for x in instances]
    order = np.argsort([-len(ids) for ids, _ in encoded], kind="stable")
    out = torch.zeros(len(encoded), encoder.config.hidden_size)
    for i in tqdm(range(0, len(order), batch_size), desc="[CLS] states", disable=not progress, leave=False):
        idx = order[i : i + batch_size]
        width = max(len(encoded[j][0]) for j in idx)
        ids = torch.zeros(len(idx), width, dtype=torch.long)
        types = torch.zeros_like(ids)
        mask = torch.zeros_like(ids)
        for row, j in enumerate(idx):
            n = len(encoded[j][0])
            ids[row, :n], types[row, :n], mask[row, :n] = torch.tensor(encoded[j][0]), torch.tensor(encoded[j][1]), 1
        hidden = encoder(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state  # (B, T, H)
        out[torch.as_tensor(idx)] = hidden[:, 0].float()
    return out


def _cached_states(ctx: Context, base, model, pairs, tokenizer) -> tuple[torch.Tensor, float]:
    key = hashlib.sha256(f"{base.revision}|{pairs.sha256}|fp32".encode()).hexdigest()[:16]
    path = config.cache_dir() / "derive" / f"cls-{key}.pt"
    proof = path.with_suffix(".sha256")
    # Proved as the feature cache is: the states are used only when their bytes hash to the proof written
    # with them; flipped bytes of the same size, a cut file or a missing proof mean computing them again.
    if path.is_file() and proof.is_file():
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() == proof.read_text().strip():
            return torch.load(io.BytesIO(data), weights_only=True), 0.0
        print(f"warning: {path} does not match its checksum: computing the [CLS] states again", file=sys.stderr)
    elif path.is_file():
        print(f"warning: {path} has no checksum beside it: computing the [CLS] states again", file=sys.stderr)
    t0 = time.perf_counter()
    states = cls_states(model.base_model, pairs.instances, tokenizer, progress=ctx.progress)
    buffer = io.BytesIO()
    torch.save(states, buffer)
    data = buffer.getvalue()
    proof.unlink(missing_ok=True)
    write_atomic(path, data)
    write_atomic(proof, (hashlib.sha256(data).hexdigest() + "\n").encode())
    return states, time.perf_counter() - t0


def _collate(rows: list[dict]) -> dict:
    return {"cls_states": torch.stack([r["cls_states"] for r in rows]),
            "labels": torch.tensor([r["labels"] for r in rows], dtype=torch.long)}


def run(ctx: Context, stage: Path) -> Outcome:
    from safetensors.torch import save_file
    from transformers import AutoTokenizer

    h = ctx.hyper
    base = models.identify(ctx.spec.base)
    tokenizer = AutoTokenizer.from_pretrained(base.path, local_files_only=True)
    model = base_nsp_model(base.path, ctx.seed)
    pairs = segment_pairs(ctx, tokenizer, model.config.max_position_embeddings)
    states, encode_s = _cached_states(ctx, base, model, pairs, tokenizer)
    labels = [x.label for x in pairs.instances]
    dataset = [{"cls_states": states[i], "labels": labels[i]} for i in range(len(labels))]
    net = PoolerNSP(copy.deepcopy(model.base_model.pooler), copy.deepcopy(model.cls.seq_relationship))

    ckpt = ctx.checkpoint_dir(base.revision, pairs.sha256)
    log = StepLog(ckpt)

    def loss_fn(m, batch):
        logits = m(batch["cls_states"])  # (B, 2)
        loss = torch.nn.functional.cross_entropy(logits, batch["labels"])
        log.add(loss=loss.detach(), nsp_accuracy=(logits.argmax(-1) == batch["labels"]).float().mean())
        return loss

    epochs, total = ctx.schedule(len(dataset))
    cfg = training.TrainConfig(epochs=epochs, batch_size=h["batch_size"], lr=h["lr"],
                               warmup_ratio=h["warmup_ratio"], weight_decay=h["weight_decay"],
                               max_grad_norm=h["max_grad_norm"], seed=ctx.seed, dtype=ctx.dtype, checkpoint_dir=ckpt,
                               checkpoint_every=100, stop_after_steps=ctx.stop_after_steps)
    # Dropout draws from the global generator: seed it for this run only (a resumed run gets the
    # checkpoint's state from accelerate), so the weights do not depend on what ran before in the process.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(ctx.seed)
        result = training.train(net, dataset, _collate, loss_fn, cfg, progress=ctx.progress)
    if result.steps < total:
        return Outcome(False, result.steps, total, checkpoint=ckpt)

    net.eval()
    with torch.inference_mode():
        accuracy = float((net(states).argmax(-1) == torch.tensor(labels)).float().mean())
    tensors = {derived.POOLER_KEYS[0]: net.pooler.dense.weight, derived.POOLER_KEYS[1]: net.pooler.dense.bias,
               derived.NSP_KEYS[0]: net.seq_relationship.weight, derived.NSP_KEYS[1]: net.seq_relationship.bias}
    tensors = {k: v.detach().contiguous().clone() for k, v in tensors.items()}
    save_file(tensors, str(stage / derived.HEADS_FILE))
    summary = log.summary()
    train_record = {**summary, "steps": result.steps, "steps_total": total,
                    "examples_seen_this_run": result.examples_seen,
                    "encode_s": round(encode_s, 1), "trainable_parameters": sum(v.numel() for v in tensors.values()),
                    "nsp_accuracy_train_all": round(accuracy, 4),
                    "nsp_accuracy_train_note": "all training pairs, after training, eval mode (not held out)",
                    "pooler_init": "the base checkpoint's pooler weights",
                    "nsp_head_init": "transformers' initialisation of cls.seq_relationship under the seed"}
    return Outcome(True, result.steps, total, {**pairs.record, "training": train_record}, tensors, ckpt)
