"""`berteval run`: a grid of (pooling x layer x seed) for one task and model, resumable.

Each cell gets a `run_id` from everything that defines it. Cells whose id is already in
the output file are skipped, so re-running a command adds nothing and a killed run
resumes where it stopped. Features come from one encoding of the data (cached), the
probe is fitted per cell, and each record is appended the moment it is done.
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import features, models, pooling, probe, provenance, records, stats
from .errors import BertevalError
from .seeds import numpy_rng
from .tasks.base import Split, TaskData, TaskSpec, split_checksum

REGIMES: dict[str, str] = {
    "probe": "frozen encoder; a head trained on its features (logistic regression per pooling and layer, "
             "or a span head for QA)",
    "finetune": "encoder and head trained together",
    "pretrained": "the checkpoint's own trained head, scored as is with no training (refused where it has none)",
}


PROBE_MAX_LENGTH = 128  # sentences and sentence pairs fit; SQuAD windows use their own default


@dataclass
class RunSpec:
    task: TaskSpec
    model: str = models.DEFAULT
    revision: str | None = None
    poolings: list[str] = field(default_factory=lambda: list(pooling.POOLINGS))
    layers: str | None = None  # e.g. "-1,-2,3"
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    regime: str = "probe"
    data_dir: Path | None = None
    out: Path = Path("leaderboard/results")
    max_length: int | None = None  # tokens per input; None = the task's default (SST-2 128, SQuAD 384)
    dtype: str = "fp32"
    limit_train: int | None = None
    limit_eval: int | None = None  # trained-head tasks only: the first N eval examples, for a quick look
    progress: bool = True
    # span QA
    doc_stride: int = 128
    n_best: int = 20
    max_answer_length: int = 30
    # trained heads (None = the regime's default)
    epochs: float | None = None
    lr: float | None = None
    batch_size: int | None = None


@dataclass
class RunReport:
    written: list[records.RunRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # run ids already present
    notes: list[str] = field(default_factory=list)
    encode_wall_s: float = 0.0
    encoded_examples: int = 0


def parse_seeds(spec: str) -> list[int]:
    try:
        seeds = [int(s) for s in str(spec).split(",") if s.strip()]
    except ValueError as exc:
        raise BertevalError(f"--seeds takes comma-separated integers such as 0,1,2, not {spec!r}") from exc
    if not seeds:
        raise BertevalError("--seeds is empty; give at least one seed, e.g. --seeds 0")
    return list(dict.fromkeys(seeds))


def limit_split(split: Split, limit: int | None) -> Split:
    """A fixed, seed-independent subset (so every seed and pooling reads the same cached vectors)."""
    if limit is None or limit >= len(split):
        return split
    if limit <= 0:
        raise BertevalError("--limit-train must be a positive number of examples")
    idx = np.sort(numpy_rng(0, "subset").permutation(len(split))[:limit])
    pick = lambda xs: [xs[i] for i in idx] if xs else []  # noqa: E731
    return Split(split.name, pick(split.texts), pick(split.labels), pick(split.ids))


def records_path(out: Path, task: str) -> Path:
    return Path(out) / f"{task}.jsonl"


def existing_records(path: Path, notes: list[str]) -> list[records.RunRecord]:
    if not path.exists():
        return []
    recs, problems = records.read_records([path])
    notes += [f"skipped bad line {p}" for p in problems]
    return recs


def paired_tests(rec: records.RunRecord, correct: np.ndarray, peers: list[records.RunRecord],
                  out: Path, cache: dict) -> list[dict]:
    """McNemar against every earlier record of the same group, on the same dev examples."""
    tests = []
    for peer in peers:
        if peer.group_key() != rec.group_key() or peer.run_id == rec.run_id or not peer.predictions_file:
            continue
        if peer.run_id not in cache:
            pf = out / peer.predictions_file
            if not pf.is_file():
                continue
            data = json.loads(pf.read_text())
            cache[peer.run_id] = np.asarray(data["pred"]) == np.asarray(data["label"])
        other = cache[peer.run_id]
        if other.shape != correct.shape:
            continue
        test = stats.mcnemar_exact(correct, other)
        tests.append({"other": {"pooling": peer.pooling, "layer": peer.layer, "run_id": peer.run_id}, **test})
    return tests


def run(spec: RunSpec) -> RunReport:
    """Dispatch: a task may bring its own runner per regime; pooled probes share the grid below."""
    provenance.git_commit()  # pin the commit now: the code that runs, whatever changes before it ends
    if spec.regime not in REGIMES:
        raise BertevalError(f"unknown regime {spec.regime!r}; choose from {', '.join(REGIMES)}")
    if spec.regime not in spec.task.regimes:
        raise BertevalError(
            f"task {spec.task.name!r} has no regime {spec.regime!r}; it supports {', '.join(spec.task.regimes)}"
        )
    custom = spec.task.regime_runners.get(spec.regime)
    if callable(custom):
        return custom(spec)
    if custom is not None:
        module, _, func = custom.partition(":")
        return getattr(importlib.import_module(module), func)(spec)
    return run_probe_grid(spec)


def new_record(spec: RunSpec, model: models.LoadedModel, *, run_id: str, data_sha256: str, split: str,
               pooling: str, layer: int, seed: int, metrics: dict, n_train: int, n_eval: int,
               config: dict, wall_s: float, predictions_file: str | None) -> records.RunRecord:
    """A record with the provenance every runner shares (versions, commit, device, command)."""
    command = " ".join(shlex.quote(a) for a in sys.argv) if sys.argv and sys.argv[0] else ""
    return records.RunRecord(
        schema_version=records.SCHEMA_VERSION,
        run_id=run_id,
        timestamp=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        model=model.model_id,
        model_revision=model.revision,
        task=spec.task.name,
        task_version=spec.task.version,
        data_sha256=data_sha256,
        split=split,
        pooling=pooling,
        regime=spec.regime,
        layer=layer,
        seed=seed,
        metrics=metrics,
        main_metric=spec.task.main_metric,
        n_train=n_train,
        n_eval=n_eval,
        config={"command": command, "model_source": model.source,
                "pooler_provenance": model.heads.pooler_provenance, **config},
        versions=provenance.versions(),
        git_commit=provenance.git_commit(),
        device=provenance.device(),
        dtype=spec.dtype,
        wall_s=round(wall_s, 3),
        predictions_file=predictions_file,
    )


def run_probe_grid(spec: RunSpec) -> RunReport:
    """Pooled probes: one encoding, then a logistic-regression head per (pooling, layer, seed)."""
    if not spec.task.uses_pooling:
        raise BertevalError(f"task {spec.task.name!r} does not read a pooled vector; it has no pooled probe")
    report = RunReport()
    max_length = spec.max_length or PROBE_MAX_LENGTH
    model = models.load(spec.model, spec.revision)
    for name in spec.poolings:
        pooling.check_available(name, model.heads)
        if caveat := pooling.warning(name, model.heads):
            report.notes.append(caveat)
    layers = features.parse_layers(spec.layers, model.num_hidden_states)
    data: TaskData = spec.task.load(spec.data_dir)
    train = limit_split(data.train, spec.limit_train)
    evals = data.eval
    data_sha = data.data_sha256 if train is data.train else TaskData.checksum(train, evals)

    cells = [
        (p, layer, seed)
        for layer in layers
        for p in spec.poolings
        for seed in spec.seeds
        if not (pooling.POOLINGS[p].last_layer_only and layer != -1)
    ]
    if any(pooling.POOLINGS[p].last_layer_only for p in spec.poolings) and any(x != -1 for x in layers):
        report.notes.append("pooler is defined on the last layer only; it is run at layer -1 alone")

    out = Path(spec.out)
    path = records_path(out, spec.task.name)
    existing = existing_records(path, report.notes)
    done = {r.run_id for r in existing}
    ident = lambda p, layer, seed: {  # noqa: E731  everything that defines a cell
        "schema": records.SCHEMA_VERSION, "model": model.model_id, "revision": model.revision,
        "task": spec.task.name, "task_version": spec.task.version, "data": data_sha, "pooling": p,
        "regime": spec.regime, "layer": layer, "seed": seed, "n_train": len(train),
        "max_length": max_length, "dtype": spec.dtype, "c_grid": probe.C_GRID,
        "heldout": [probe.HELDOUT_MAX, probe.HELDOUT_FRACTION],
    }
    todo = [(c, records.run_id(ident(*c))) for c in cells]
    report.skipped = [rid for _, rid in todo if rid in done]
    todo = [(c, rid) for c, rid in todo if rid not in done]
    if not todo:
        return report

    need_p = list(dict.fromkeys(c[0] for c, _ in todo))
    need_l = list(dict.fromkeys(c[1] for c, _ in todo))
    vecs = {}
    for split in (train, evals):
        enc = features.encode(
            model, split.texts, data_sha256=split_checksum(split), poolings=need_p, layers=need_l,
            max_length=max_length, dtype=spec.dtype, progress=spec.progress, desc=f"encoding {split.name}",
        )
        vecs[split.name] = enc.vectors
        report.encode_wall_s += enc.wall_s
        report.encoded_examples += enc.encoded

    peers = list(existing)
    correct_cache: dict[str, np.ndarray] = {}
    y_eval = np.asarray(evals.labels)
    for (p, layer, seed), rid in todo:
        t0 = time.perf_counter()
        res = probe.fit_probe(vecs[train.name][(p, layer)], train.labels, vecs[evals.name][(p, layer)], seed)
        wall = time.perf_counter() - t0
        correct = res.pred == y_eval
        pred_rel = f"predictions/{spec.task.name}/{rid}.json"
        head_rel = f"heads/{spec.task.name}/{rid}.npz"
        records.write_json_atomic(out / pred_rel, {
            "run_id": rid, "split": evals.name, "data_sha256": data_sha,
            "label": y_eval.tolist(), "pred": res.pred.tolist(),
            "proba": np.round(res.proba[:, 1] if res.proba.shape[1] == 2 else res.proba, 5).tolist(),
        })
        (out / head_rel).parent.mkdir(parents=True, exist_ok=True)
        np.savez(out / head_rel, weight=res.head.weight.astype(np.float32), bias=res.head.bias.astype(np.float32))
        rec = new_record(
            spec, model, run_id=rid, data_sha256=data_sha, split=evals.name, pooling=p, layer=layer, seed=seed,
            metrics={"accuracy": float(correct.mean())}, n_train=res.n_train, n_eval=len(evals),
            config={
                "data_source": data.source,
                "train_examples_available": len(train),
                "limit_train": spec.limit_train,
                "max_length": max_length,
                "probe": {"head": "standardise + logistic regression (scikit-learn, lbfgs)",
                          "c_grid": list(probe.C_GRID), "chosen_c": res.chosen_c,
                          "heldout_accuracy": {str(k): v for k, v in res.heldout_accuracy.items()},
                          "n_heldout": res.n_heldout},
                "encode_wall_s": round(report.encode_wall_s, 3),
                "head_file": head_rel,
            },
            wall_s=wall, predictions_file=pred_rel,
        )
        correct_cache[rid] = correct
        rec.paired_tests = paired_tests(rec, correct, peers, out, correct_cache)
        records.append_record(path, rec)
        peers.append(rec)
        report.written.append(rec)
    return report
