"""`--regime finetune` for sentence(-pair) classification: the encoder and a head that
reads one pooled vector, trained together.

The head mirrors the seed's `BertForSequenceClassification` (dropout, then one
`Linear(hidden, labels)`), except that the vector it reads comes from the pooling
registry: `cls`, `pooler` (the seed's choice) or `mean`. A frozen probe answers "what do
the vectors already hold"; this answers "what should my classifier read" when every
weight may move. Training runs through `berteval.training` (accelerate: the same command
scales under `accelerate launch`; checkpoints make a killed run resume). The model
state after each epoch is scored on the seeded held-out slice of train and the best
epoch is kept (selection); dev is scored once, at the end.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import numpy as np
import torch

from . import features, models, pooling, probe, records, training
from .config import cache_dir
from .errors import BertevalError
from .runner import (PROBE_MAX_LENGTH, RunReport, RunSpec, existing_records, limit_split, new_record, paired_tests,
                     records_path)
from .tasks.base import Split, TaskData

DEFAULTS = {"epochs": 2.0, "lr": 1e-4, "batch_size": 32}
# Offline, on 2 CPU cores, the whole of SST-2 train x 9 runs does not fit a session; a fixed,
# seeded subset does, and every record says its size.
DEFAULT_TRAIN_SUBSET = 4_000
FINETUNE_POOLINGS = ("cls", "pooler", "mean")


class PooledClassifier(torch.nn.Module):
    """encoder -> pooling (registry) -> dropout -> Linear(hidden, n_labels)."""

    def __init__(self, encoder: torch.nn.Module, pooling_name: str, n_labels: int):
        super().__init__()
        self.encoder = encoder
        self.pooling = pooling_name
        self.dropout = torch.nn.Dropout(getattr(encoder.config, "hidden_dropout_prob", 0.1))
        self.classifier = torch.nn.Linear(encoder.config.hidden_size, n_labels)

    def forward(self, input_ids, attention_mask, token_type_ids=None, labels=None):
        kwargs = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask, **kwargs).last_hidden_state
        vec = pooling.apply(self.pooling, hidden, attention_mask, self.encoder)  # (B, H)
        logits = self.classifier(self.dropout(vec))  # (B, n_labels)
        loss = torch.nn.functional.cross_entropy(logits.float(), labels) if labels is not None else None
        return loss, logits


class _Examples(torch.utils.data.Dataset):
    def __init__(self, enc: dict, labels: list[int]):
        self.enc, self.labels = enc, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> int:
        return i


def _collate(tokenizer, ds: _Examples):
    keys = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in ds.enc]

    def collate(idx: list[int]) -> dict:
        batch = dict(tokenizer.pad([{k: ds.enc[k][i] for k in keys} for i in idx], return_tensors="pt"))
        batch["labels"] = torch.as_tensor([ds.labels[i] for i in idx])
        return batch

    return collate


@torch.inference_mode()
def predict(model: PooledClassifier, loaded: models.LoadedModel, texts: list, max_length: int,
            dtype: str) -> np.ndarray:
    """(N, n_labels) probabilities, in the order of `texts`."""
    model.eval()
    out = None
    for idx, batch in features.padded_batches(loaded, texts, max_length):
        with features.autocast(dtype):
            _, logits = model(**batch)
        p = torch.softmax(logits.float(), -1).numpy()
        if out is None:
            out = np.zeros((len(texts), p.shape[1]), dtype=np.float32)
        out[idx] = p
    return out


def _subset(spec: RunSpec, train: Split) -> Split:
    limit = spec.limit_train if spec.limit_train is not None else DEFAULT_TRAIN_SUBSET
    return limit_split(train, limit)


def run_finetune(spec: RunSpec) -> RunReport:
    report = RunReport()
    bad = [p for p in spec.poolings if p not in FINETUNE_POOLINGS]
    if bad:
        raise BertevalError(f"--regime finetune reads {', '.join(FINETUNE_POOLINGS)}; not {', '.join(bad)}")
    if spec.layers not in (None, "", "-1"):
        raise BertevalError("--regime finetune trains a head on the last layer; drop --layers")
    loaded = models.load(spec.model, spec.revision)
    for name in spec.poolings:
        pooling.check_available(name, loaded.heads)
        if caveat := pooling.warning(name, loaded.heads):
            report.notes.append(caveat + " (fine-tuning trains it)")
    max_length = spec.max_length or PROBE_MAX_LENGTH
    data: TaskData = spec.task.load(spec.data_dir)
    train = _subset(spec, data.train)
    evals = data.eval
    data_sha = data.data_sha256 if train is data.train else TaskData.checksum(train, evals)
    hp = {**DEFAULTS, **{k: v for k, v in {"epochs": spec.epochs, "lr": spec.lr,
                                            "batch_size": spec.batch_size}.items() if v is not None}}
    n_labels = max(max(train.labels), max(evals.labels)) + 1

    out = Path(spec.out)
    path = records_path(out, spec.task.name)
    existing = existing_records(path, report.notes)
    done = {r.run_id for r in existing}
    todo = []
    for p in spec.poolings:
        for seed in spec.seeds:
            rid = records.run_id({"schema": records.SCHEMA_VERSION, "model": loaded.model_id,
                                  "revision": loaded.revision, "task": spec.task.name,
                                  "task_version": spec.task.version, "data": data_sha, "pooling": p,
                                  "regime": "finetune", "layer": -1, "seed": seed, "n_train": len(train),
                                  "max_length": max_length, "dtype": spec.dtype, **hp,
                                  "heldout": [probe.HELDOUT_MAX, probe.HELDOUT_FRACTION]})
            (report.skipped.append(rid) if rid in done else todo.append((p, seed, rid)))
    if not todo:
        return report

    enc = features.tokenise(loaded, train.texts, max_length)
    peers = list(existing)
    correct_cache: dict[str, np.ndarray] = {}
    y_eval = np.asarray(evals.labels)
    for p, seed, rid in todo:
        tr_idx, ho_idx = probe.heldout_split(len(train), seed)
        tr_enc = {k: [v[i] for i in tr_idx] for k, v in enc.items() if k != "offset_mapping"}
        ds = _Examples(tr_enc, [train.labels[i] for i in tr_idx])
        heldout_texts = [train.texts[i] for i in ho_idx]
        heldout_y = np.asarray([train.labels[i] for i in ho_idx])
        torch.manual_seed(seed)  # the head's initialisation; batches use their own generators
        model = PooledClassifier(copy.deepcopy(loaded.encoder), p, n_labels)
        for param in model.parameters():
            param.requires_grad = True
        ckpt = cache_dir() / "checkpoints" / rid
        heldout_scores: list[float] = []

        def select(m, epoch: int) -> float:
            acc = float((predict(m, loaded, heldout_texts, max_length, spec.dtype).argmax(1) == heldout_y).mean())
            heldout_scores.append(acc)
            return acc

        cfg = training.TrainConfig(epochs=hp["epochs"], batch_size=hp["batch_size"], lr=hp["lr"], seed=seed,
                                   dtype=spec.dtype, checkpoint_dir=ckpt, checkpoint_every=200)
        t0 = time.perf_counter()
        res = training.train(model, ds, _collate(loaded.tokenizer, ds), lambda m, b: m(**b)[0], cfg,
                             progress=spec.progress, lengths=[len(x) for x in tr_enc["input_ids"]],
                             on_epoch_end=select)
        model = getattr(model, "module", model)
        proba = predict(model, loaded, evals.texts, max_length, spec.dtype)
        wall = time.perf_counter() - t0
        pred = proba.argmax(1)
        correct = pred == y_eval
        pred_rel = f"predictions/{spec.task.name}/{rid}.json"
        records.write_json_atomic(out / pred_rel, {
            "run_id": rid, "split": evals.name, "data_sha256": data_sha, "label": y_eval.tolist(),
            "pred": pred.tolist(), "proba": np.round(proba[:, 1] if proba.shape[1] == 2 else proba, 5).tolist()})
        rec = new_record(
            spec, loaded, run_id=rid, data_sha256=data_sha, split=evals.name, pooling=p, layer=-1, seed=seed,
            metrics={"accuracy": float(correct.mean())}, n_train=len(tr_idx), n_eval=len(evals),
            config={"data_source": data.source, "train_examples_available": len(train),
                    "train_subset": f"fixed seeded subset of {len(train)} of {len(data.train)} train examples"
                    if train is not data.train else "full train", "max_length": max_length,
                    "finetune": {"head": "dropout + Linear(hidden, labels) on the pooled vector; whole encoder trained",
                                 **hp, "warmup_ratio": cfg.warmup_ratio, "weight_decay": cfg.weight_decay,
                                 "batches": "length-grouped", "steps": res.steps,
                                 "examples_seen": res.examples_seen, "epochs_run": res.epochs_run,
                                 "train_wall_s": round(res.wall_s, 1), "heldout_accuracy_per_epoch":
                                 [round(x, 4) for x in res.epoch_scores], "selected_epoch": res.best_epoch,
                                 "n_heldout": len(ho_idx), "first_loss": round(res.losses[0], 4) if res.losses else None,
                                 "last_loss": round(float(np.mean(res.losses[-50:])), 4) if res.losses else None,
                                 "resumed_from_step": res.resumed_from_step}},
            wall_s=wall, predictions_file=pred_rel)
        correct_cache[rid] = correct
        # Re-read the file: a sweep split across processes (e.g. one per pooling) still pairs
        # each record with every finished record of its group.
        peers = {r.run_id: r for r in [*peers, *existing_records(path, [])]}.values()
        rec.paired_tests = paired_tests(rec, correct, list(peers), out, correct_cache)
        records.append_record(path, rec)
        peers = [*peers, rec]
        report.written.append(rec)
        training.clear_checkpoint(cfg)
    return report
