"""`berteval run --task squad`: the span head scored on the official SQuAD v1.1 dev set.

Three regimes, one evaluation path:
- probe: the encoder frozen, only the span head (`Linear(hidden, 2)`) trained;
- finetune: LoRA adapters on every encoder linear layer (peft) plus the span head,
  trained together; the adapter is small enough to commit and is what the app loads;
- pretrained: a checkpoint's own trained QA head, no training (refused without one).
Training reads the training questions available (offline: the 3,939-question subset,
said in every record); evaluation always runs every dev question through its windows
and writes the official predictions format (question id -> answer text).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from . import models, qa, records, squad_metrics, training
from .config import cache_dir
from .features import autocast
from .qa_features import Windows, make_windows
from .runner import RunReport, RunSpec, existing_records, new_record, records_path
from .seeds import numpy_rng

DEFAULT_MAX_LENGTH = 384
LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0,  # dropout on the LoRA input doubled step time on CPU
        # every linear layer of every encoder block: attention q/k/v/output and the feed-forward pair
        "target_modules": r".*encoder\.layer\.\d+\.(attention\.self\.(query|key|value)|attention\.output\.dense|"
                          r"intermediate\.dense|output\.dense)"}
TRAIN_DEFAULTS = {"probe": {"epochs": 3.0, "lr": 5e-3, "batch_size": 32},
                  "finetune": {"epochs": 2.0, "lr": 5e-4, "batch_size": 32}}


@dataclass
class _Setup:
    loaded: models.LoadedModel
    data: object  # tasks.squad.QAData
    train: list
    dev: list
    data_sha: str
    max_length: int


def _setup(spec: RunSpec) -> _Setup:
    from .tasks.squad import QAData

    loaded = models.load(spec.model, spec.revision)
    data = spec.task.load(spec.data_dir)
    train = data.train
    if spec.limit_train is not None and spec.limit_train < len(train):
        idx = np.sort(numpy_rng(0, "subset").permutation(len(train))[: spec.limit_train])
        train = [train[i] for i in idx]
    dev = data.eval
    if spec.limit_eval is not None and spec.limit_eval < len(dev):
        dev = dev[: spec.limit_eval]  # the first N: a quick look, never a leaderboard row
    sha = data.data_sha256 if (train is data.train and dev is data.eval) else QAData.checksum(train, dev)
    return _Setup(loaded, data, train, dev, sha, spec.max_length or DEFAULT_MAX_LENGTH)


def _identity(spec: RunSpec, s: _Setup, seed: int, extra: dict) -> dict:
    return {"schema": records.SCHEMA_VERSION, "model": s.loaded.model_id, "revision": s.loaded.revision,
            "task": spec.task.name, "task_version": spec.task.version, "data": s.data_sha, "regime": spec.regime,
            "seed": seed, "max_length": s.max_length, "doc_stride": spec.doc_stride, "n_best": spec.n_best,
            "max_answer_length": spec.max_answer_length, "dtype": spec.dtype, "n_train": len(s.train), **extra}


def _evaluate(spec: RunSpec, s: _Setup, model: torch.nn.Module) -> tuple[dict, dict, dict, dict]:
    """(metrics, predictions, nbest, timing) on every dev question."""
    t0 = time.perf_counter()
    windows = make_windows(s.loaded.tokenizer, [e.question for e in s.dev], [e.context for e in s.dev],
                           max_length=s.max_length, doc_stride=spec.doc_stride)
    starts, ends = qa.window_logits(model, s.loaded.tokenizer, windows, dtype=spec.dtype, progress=spec.progress)
    nbest = qa.decode(windows, [e.context for e in s.dev], starts, ends, spec.n_best, spec.max_answer_length)
    wall = time.perf_counter() - t0
    predictions = {e.id: (c[0].text if c else "") for e, c in zip(s.dev, nbest)}
    metrics = squad_metrics.score(predictions, {e.id: list(e.answers) for e in s.dev})
    nbest_out = {e.id: [{"text": c.text, "probability": round(c.probability, 5), "score": round(c.score, 4),
                         "start_char": c.start_char} for c in cands] for e, cands in zip(s.dev, nbest)}
    return metrics, predictions, nbest_out, {"eval_wall_s": round(wall, 2), "n_eval_windows": len(windows)}


def _write(spec: RunSpec, s: _Setup, rid: str, seed: int, metrics: dict, predictions: dict, nbest: dict,
           config: dict, wall: float, report: RunReport) -> None:
    out = Path(spec.out)
    pred_rel = f"predictions/squad/{rid}.json"
    records.write_json_atomic(out / pred_rel, predictions)  # the official format: id -> answer
    records.write_json_atomic(out / "predictions" / "squad" / "nbest" / f"{rid}.json", nbest)  # large, not committed
    rec = new_record(spec, s.loaded, run_id=rid, data_sha256=s.data_sha, split="validation", pooling="span",
                     layer=-1, seed=seed, metrics={k: round(v, 4) for k, v in metrics.items()},
                     n_train=len(s.train) if spec.regime != "pretrained" else 0, n_eval=len(s.dev),
                     config={"data_source": s.data.source, "train_source": s.data.train_source,
                             "max_seq_length": s.max_length, "doc_stride": spec.doc_stride, "n_best": spec.n_best,
                             "max_answer_length": spec.max_answer_length, "limit_eval": spec.limit_eval, **config},
                     wall_s=wall, predictions_file=pred_rel)
    records.append_record(records_path(out, spec.task.name), rec)
    report.written.append(rec)


def _pending(spec: RunSpec, s: _Setup, extra: dict, report: RunReport) -> list[tuple[int, str]]:
    done = {r.run_id for r in existing_records(records_path(Path(spec.out), spec.task.name), report.notes)}
    todo = []
    for seed in spec.seeds:
        rid = records.run_id(_identity(spec, s, seed, extra))
        (report.skipped if rid in done else todo).append(rid if rid in done else (seed, rid))
    return todo


class _WindowSet(torch.utils.data.Dataset):
    def __init__(self, windows: Windows):
        self.w = windows

    def __len__(self) -> int:
        return len(self.w)

    def __getitem__(self, i: int) -> int:
        return i


def _collate(tokenizer, windows: Windows):
    def collate(idx: list[int]) -> dict:
        batch = dict(tokenizer.pad([windows.features[i] for i in idx], return_tensors="pt"))
        batch["start_positions"] = torch.as_tensor(windows.start_positions[idx])
        batch["end_positions"] = torch.as_tensor(windows.end_positions[idx])
        return batch

    return collate


def _qa_loss(model, batch):
    return model(**batch).loss  # mean of the start and end cross-entropies


def _train_windows(s: _Setup, spec: RunSpec) -> Windows:
    train = [e for e in s.train if e.answers]
    return make_windows(s.loaded.tokenizer, [e.question for e in train], [e.context for e in train],
                        max_length=s.max_length, doc_stride=spec.doc_stride,
                        answer_starts=[e.answer_starts[0] for e in train], answer_texts=[e.answers[0] for e in train])


@dataclass
class _Plan:
    """What a trained regime trains, on what, and how it becomes a QA model for evaluation."""

    module: torch.nn.Module  # the parameters that learn (and a forward for the loss)
    dataset: torch.utils.data.Dataset
    collate: object
    loss: object  # (module, batch) -> loss
    finish: object  # (module, run_id) -> (eval model, extra config)


def _trained_run(spec: RunSpec, plan, describe: dict) -> RunReport:
    """Shared by probe and finetune: plan(setup, windows, seed) -> _Plan."""
    report = RunReport()
    s = _setup(spec)
    hp = {**TRAIN_DEFAULTS[spec.regime], **{k: v for k, v in
                                             {"epochs": spec.epochs, "lr": spec.lr, "batch_size": spec.batch_size}.items()
                                             if v is not None}}
    extra = {**describe, **hp, "batches": "length-grouped"}
    todo = _pending(spec, s, extra, report)
    if not todo:
        return report
    tw = _train_windows(s, spec)
    answerable = float((tw.start_positions > 0).mean())
    for seed, rid in todo:
        torch.manual_seed(seed)  # the head's initialisation; sampling uses its own generators
        p = plan(s, tw, seed)
        cfg = training.TrainConfig(epochs=hp["epochs"], batch_size=hp["batch_size"], lr=hp["lr"], seed=seed,
                                   dtype=spec.dtype, checkpoint_dir=cache_dir() / "checkpoints" / rid)
        res = training.train(p.module, p.dataset, p.collate, p.loss, cfg, progress=spec.progress,
                             lengths=[len(f["input_ids"]) for f in tw.features])
        if res.resumed_from_step:
            report.notes.append(f"seed {seed}: resumed training from step {res.resumed_from_step}")
        eval_model, more = p.finish(getattr(p.module, "module", p.module), rid)
        config = {"training": {**extra, "steps": res.steps, "examples_seen": res.examples_seen,
                               "train_wall_s": round(res.wall_s, 1),
                               "first_loss": round(res.losses[0], 4) if res.losses else None,
                               "last_loss": round(float(np.mean(res.losses[-20:])), 4) if res.losses else None,
                               "resumed_from_step": res.resumed_from_step},
                  "n_train_windows": len(tw), "train_windows_with_answer": round(answerable, 4), **more}
        metrics, preds, nbest, timing = _evaluate(spec, s, eval_model)
        config.update(timing)
        _write(spec, s, rid, seed, metrics, preds, nbest, config, res.wall_s + timing["eval_wall_s"], report)
        training.clear_checkpoint(cfg)
    return report


class _SpanHead(torch.nn.Module):
    """The span head alone, trained on cached hidden states: logits = Linear(hidden, 2) per token."""

    def __init__(self, qa_outputs: torch.nn.Linear):
        super().__init__()
        self.qa_outputs = qa_outputs

    def forward(self, hidden, attention_mask, start_positions, end_positions):
        logits = self.qa_outputs(hidden.float())  # (B, T, 2)
        pad = attention_mask == 0
        start, end = (x.squeeze(-1).masked_fill(pad, -1e4) for x in logits.split(1, dim=-1))  # (B, T) each
        ce = torch.nn.functional.cross_entropy
        return (ce(start, start_positions) + ce(end, end_positions)) / 2


@torch.inference_mode()
def _hidden_states(s: _Setup, spec: RunSpec, model: torch.nn.Module, tw: Windows) -> list[torch.Tensor]:
    """last_hidden_state of every training window, once: a frozen encoder gives the same vectors
    every epoch, so the probe pays one forward pass instead of one per epoch."""
    base = model.base_model
    out: list[torch.Tensor | None] = [None] * len(tw)
    lengths = np.array([len(f["input_ids"]) for f in tw.features])
    order = np.argsort(-lengths, kind="stable")
    for i in range(0, len(order), 16):
        idx = order[i : i + 16]
        batch = s.loaded.tokenizer.pad([tw.features[j] for j in idx], return_tensors="pt")
        with autocast(spec.dtype):
            hidden = base(**batch).last_hidden_state  # (B, T, H)
        for row, j in enumerate(idx):
            out[j] = hidden[row, : lengths[j]].to(torch.bfloat16)  # bf16 storage halves the memory
    return out


def run_probe(spec: RunSpec) -> RunReport:
    cached: dict[str, list[torch.Tensor]] = {}

    def plan(s: _Setup, tw: Windows, seed: int) -> _Plan:
        model = qa.head_model(s.loaded)
        if "hidden" not in cached:
            t0 = time.perf_counter()
            cached["hidden"] = _hidden_states(s, spec, model, tw)
            cached["hidden_wall_s"] = round(time.perf_counter() - t0, 1)
        hidden = cached["hidden"]

        def collate(idx: list[int]) -> dict:
            h = torch.nn.utils.rnn.pad_sequence([hidden[i] for i in idx], batch_first=True)  # (B, T, H)
            mask = torch.nn.utils.rnn.pad_sequence([torch.ones(len(hidden[i]), dtype=torch.long) for i in idx],
                                                   batch_first=True)
            return {"hidden": h, "attention_mask": mask,
                    "start_positions": torch.as_tensor(tw.start_positions[idx]),
                    "end_positions": torch.as_tensor(tw.end_positions[idx])}

        def finish(head: _SpanHead, rid: str):
            model.qa_outputs.load_state_dict(head.qa_outputs.state_dict())
            return model, {"hidden_states_wall_s": cached["hidden_wall_s"]}  # the one forward pass over train

        return _Plan(_SpanHead(torch.nn.Linear(model.config.hidden_size, 2)), _WindowSet(tw), collate,
                     lambda m, b: m(**b), finish)

    return _trained_run(spec, plan, {"trained": "span head only, on the frozen encoder's cached hidden states"})


def run_finetune(spec: RunSpec) -> RunReport:
    def plan(s: _Setup, tw: Windows, seed: int) -> _Plan:
        from peft import LoraConfig, get_peft_model

        lcfg = LoraConfig(r=LORA["r"], lora_alpha=LORA["lora_alpha"], lora_dropout=LORA["lora_dropout"],
                          target_modules=LORA["target_modules"], modules_to_save=["qa_outputs"])
        model = get_peft_model(qa.head_model(s.loaded), lcfg)

        def finish(trained, rid: str):
            adapter_rel = f"adapters/squad/{rid}"
            qa.save_adapter(trained, Path(spec.out) / adapter_rel,
                            {"base_model_arg": spec.model, "base_model": s.loaded.model_id,
                             "base_revision": s.loaded.revision, "run_id": rid, "lora": LORA,
                             "summary": f"{s.loaded.model_id}, {len(s.train)} train questions, seed {seed}"})
            return trained.merge_and_unload(), {"adapter_dir": adapter_rel}

        return _Plan(model, _WindowSet(tw), _collate(s.loaded.tokenizer, tw), _qa_loss, finish)

    return _trained_run(spec, plan, {"trained": "LoRA adapters on every encoder linear layer + span head",
                                     "lora": {k: v for k, v in LORA.items() if k != "target_modules"}})


def run_pretrained(spec: RunSpec) -> RunReport:
    report = RunReport()
    s = _setup(spec)
    model = qa.head_model(s.loaded, require_pretrained=True)
    if spec.seeds != [spec.seeds[0]]:
        report.notes.append("a pretrained head has nothing to seed: one record, seed 0")
    todo = _pending(RunSpec(**{**spec.__dict__, "seeds": [0]}), s, {"trained": "none"}, report)
    for seed, rid in todo:
        metrics, preds, nbest, timing = _evaluate(spec, s, model)
        _write(spec, s, rid, seed, metrics, preds, nbest, {"trained": "none: the checkpoint's own QA head", **timing},
               timing["eval_wall_s"], report)
    return report


