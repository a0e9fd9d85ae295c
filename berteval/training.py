"""One training loop for every trained head (span QA, later sentence classification),
run through Hugging Face `accelerate`, so the same code runs on this CPU and, unchanged,
under `accelerate launch` on several GPUs or nodes (the DataLoader is sharded by
`prepare`, gradients are synchronised by `backward`).

AdamW with linear warm-up and linear decay, gradient clipping, optional bf16 autocast
(accelerate's mixed precision; on CPU it reaches AMX; on a CUDA GPU without bf16, fp16 autocast
with a gradient scaler: `mixed_precision`). Batches come from a seeded
sampler, one generator per epoch, so a run is reproducible and a resumed run sees
exactly the batches it would have seen. Checkpoints (`accelerator.save_state` plus a
small progress file inside the same folder) are written every `checkpoint_every` steps and at an epoch's end
when the last one is a quarter of that back; a killed run restarts from the last one, not from zero.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from torch.utils.data import DataLoader, RandomSampler
from tqdm.auto import tqdm

from .errors import BertevalError
from .seeds import torch_generator
from .store import write_atomic


@dataclass
class TrainConfig:
    epochs: float = 2.0
    batch_size: int = 32
    lr: float = 5e-4
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    seed: int = 0
    dtype: str = "bf16"  # "bf16" autocast or "fp32"
    checkpoint_dir: Path | None = None
    checkpoint_every: int = 50
    # Recompute each encoder layer's activations in the backward pass instead of keeping them: a SQuAD batch
    # of 32 windows x 384 tokens holds ~6.5 GB of activations (attention scores, softmax and dropout masks of
    # 6 layers), ~1.9 GB recomputed; one more forward pass per step. The weights it produces are bit for bit
    # the same (dropout masks are replayed from the saved RNG state; tests/core/test_training_memory.py).
    # It also fixes glibc's mmap threshold for the process (`lean_heap`): the allocator, not the numbers.
    activation_checkpointing: bool = False
    stop_after_steps: int | None = None  # for tests: simulate a kill after this many steps


@dataclass
class TrainResult:
    steps: int
    losses: list[float] = field(default_factory=list)  # per step, the whole run (restored on resume)
    wall_s: float = 0.0  # the whole run's training time: this process's plus every earlier segment's
    resumed_from_step: int = 0
    # One entry per process that trained this run and reached a checkpoint (steps from/to, its training seconds,
    # its peak RSS, the CPU or GPU it ran on): a run killed and resumed, perhaps on another machine, still
    # reports its whole wall time and the largest memory any part needed. Steps after a segment's last
    # checkpoint are redone by the next one and counted there.
    segments: list[dict] = field(default_factory=list)
    peak_rss_mb: float = 0.0  # the largest of every segment's peak RSS, this process's included
    examples_seen: int = 0
    epoch_scores: list[float] = field(default_factory=list)  # on_epoch_end's score after each epoch
    lean_heap: bool = False  # glibc's mmap threshold was fixed for this process (lean_heap)
    best_epoch: int | None = None  # 1-based epoch whose weights were kept
    epochs_run: float = 0.0


STATE, STAGED, PREVIOUS = "state", "state.tmp", "state.old"  # a checkpoint's folder, the next one, the last one
PROGRESS = "progress.json"  # the counters (step, losses, examples seen, epoch scores), inside the state folder


def _progress_file(cfg: TrainConfig) -> Path | None:
    """The progress file of the current checkpoint: written into the staged folder before it is renamed, so
    the weights and the counters that describe them are swapped in together (one rename)."""
    return cfg.checkpoint_dir / STATE / PROGRESS if cfg.checkpoint_dir else None


def _save_torch(obj, path: Path) -> None:
    """torch.save through the atomic writer: a kill or a full disk leaves the previous file, never half of one."""
    import io

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    write_atomic(path, buffer.getvalue())


class LengthGroupedBatches(torch.utils.data.Sampler):
    """Seeded batches of similar length: shuffle, sort within chunks of 50 batches, shuffle the
    batches. Padding to the longest in a batch then wastes little: on SQuAD windows (mean 154
    tokens, max 384) random batches pad nearly every batch to 384."""

    def __init__(self, lengths, batch_size: int, generator: torch.Generator, chunk: int = 50):
        self.lengths = torch.as_tensor(lengths)
        self.batch_size, self.generator, self.chunk = batch_size, generator, chunk

    def _batches(self) -> list[list[int]]:
        perm = torch.randperm(len(self.lengths), generator=self.generator)
        size = self.batch_size * self.chunk
        out = []
        for i in range(0, len(perm), size):
            part = perm[i : i + size]
            part = part[torch.argsort(self.lengths[part], descending=True, stable=True)]
            out += [part[j : j + self.batch_size].tolist() for j in range(0, len(part), self.batch_size)]
        order = torch.randperm(len(out), generator=self.generator)
        return [out[k] for k in order]

    def __iter__(self):
        return iter(self._batches())

    def __len__(self) -> int:
        return (len(self.lengths) + self.batch_size - 1) // self.batch_size


def _optimiser(model: torch.nn.Module, cfg: TrainConfig, total: int):
    """AdamW (no decay on biases and LayerNorm weights) with linear warm-up and linear decay."""
    params = [p for p in model.parameters() if p.requires_grad]
    scaled = [p for p in params if getattr(p, "lr_scale", 1.0) != 1.0]  # e.g. attention pooling's query
    plain = [p for p in params if getattr(p, "lr_scale", 1.0) == 1.0]
    groups = [{"params": [p for p in plain if p.ndim >= 2], "weight_decay": cfg.weight_decay},
              {"params": [p for p in plain if p.ndim < 2], "weight_decay": 0.0}]
    groups += [{"params": [p], "weight_decay": 0.0, "lr": cfg.lr * p.lr_scale} for p in scaled]
    optimizer = torch.optim.AdamW([g for g in groups if g["params"]], lr=cfg.lr)
    warmup = int(cfg.warmup_ratio * total)
    schedule = lambda step: (step + 1) / max(1, warmup) if step < warmup else max(  # noqa: E731
        0.0, (total - step) / max(1, total - warmup))
    return params, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)


def _loader(accelerator, dataset, collate: Callable, cfg: TrainConfig, epoch: int, lengths):
    """The epoch's batches, from generators of its own: a resumed run sees exactly these batches."""
    gen = torch_generator(cfg.seed * 1000 + epoch, "train")
    # The loader gets a generator of its own: without one, every new iterator draws from the
    # global RNG, so a resumed run's dropout masks would drift from the uninterrupted run's.
    own = {"generator": torch_generator(cfg.seed * 1000 + epoch, "loader"), "collate_fn": collate}
    if lengths is not None:
        loader = DataLoader(dataset, batch_sampler=LengthGroupedBatches(lengths, cfg.batch_size, gen), **own)
    else:
        loader = DataLoader(dataset, batch_size=cfg.batch_size, sampler=RandomSampler(dataset, generator=gen), **own)
    return accelerator.prepare(loader)


class _Selection:
    """Model selection across epochs: score each epoch's weights, keep the best (also across a resume)."""

    def __init__(self, cfg: TrainConfig, result: TrainResult, on_epoch_end: Callable | None):
        self.cfg, self.result, self.on_epoch_end = cfg, result, on_epoch_end
        self.best_state: dict | None = None
        if cfg.checkpoint_dir is not None and (cfg.checkpoint_dir / "best.pt").is_file():
            self.best_state = torch.load(cfg.checkpoint_dir / "best.pt", weights_only=True)

    def epoch_end(self, accelerator, model) -> None:
        result = self.result
        unwrapped = accelerator.unwrap_model(model)
        score = float(self.on_epoch_end(unwrapped, len(result.epoch_scores) + 1))
        model.train()
        result.epoch_scores.append(score)
        if result.best_epoch is None or score > result.epoch_scores[result.best_epoch - 1]:
            result.best_epoch = len(result.epoch_scores)
            self.best_state = {k: v.detach().clone() for k, v in unwrapped.state_dict().items()}
            if self.cfg.checkpoint_dir is not None and accelerator.is_main_process:
                _save_torch(self.best_state, self.cfg.checkpoint_dir / "best.pt")

    def restore(self, accelerator, model) -> None:
        if self.best_state is not None and self.result.best_epoch != len(self.result.epoch_scores):
            accelerator.unwrap_model(model).load_state_dict(self.best_state)  # keep the selected epoch's weights


def mixed_precision(dtype: str) -> str:
    """accelerate's mixed precision for `dtype` on the process's device (`precision.effective`, trained):
    "bf16" where the device has bf16 (the CPU always), "fp16" on a CUDA GPU without it (accelerate then
    scales the loss with a GradScaler: `backward` scales, `clip_grad_norm_` unscales, a step with inf or
    NaN gradients is skipped with its scheduler step), "no" for fp32."""
    from . import precision

    return {"bf16": "bf16", "fp16": "fp16"}.get(precision.effective(dtype, precision.MIXED), "no")


def train(model: torch.nn.Module, dataset, collate: Callable, loss_fn: Callable, cfg: TrainConfig,
          progress: bool = True, lengths=None, on_epoch_end: Callable | None = None) -> TrainResult:
    """Train the parameters of `model` that require grad; `loss_fn(model, batch) -> scalar loss`.
    With `lengths` (tokens per example), batches group examples of similar length. With
    `on_epoch_end(model, epoch) -> score` (higher is better, e.g. held-out accuracy), the
    weights of the best-scoring epoch are the ones left in `model` (model selection)."""
    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs

    # cpu=True where there is no GPU: accelerate joins the processes of a multi-process launch over gloo only
    # when told it runs on the CPU; otherwise each process trains alone, unsynchronised, believing it is rank 0.
    # find_unused_parameters: a head reading `cls` or `mean` leaves the pooler without a gradient, and DDP
    # stops at the second step when a trainable parameter got none (one process never notices).
    from . import devices

    # The process's device (berteval.devices): on the CPU accelerate must be told so, even where a GPU is present.
    accelerator = Accelerator(mixed_precision=mixed_precision(cfg.dtype),
                              cpu=devices.current().type == "cpu",
                              kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)])
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    if accelerator.num_processes != launched:
        raise BertevalError(
            f"{launched} processes were launched but accelerate joined {accelerator.num_processes}: they would "
            f"train separately. On a CPU machine launch with torchrun semantics, e.g. `accelerate launch "
            f"--multi_gpu --num_processes {launched} -m berteval run ...` (no GPU needed: the processes meet over gloo)."
        )
    if cfg.activation_checkpointing:
        checkpoint_activations(model)
    lean = cfg.activation_checkpointing and lean_heap()
    steps_per_epoch = math.ceil(len(dataset) / cfg.batch_size / accelerator.num_processes)
    total = max(1, int(round(cfg.epochs * steps_per_epoch)))
    params, optimizer, scheduler = _optimiser(model, cfg, total)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    _save_trained_weights_only(accelerator)
    result = _resume(accelerator, cfg)
    result.lean_heap = lean
    selection = _Selection(cfg, result, on_epoch_end)
    step, t0 = result.resumed_from_step, time.perf_counter()
    saved_at = step  # the step of the last checkpoint (or where this run started)
    model.train()
    bar = tqdm(total=total, initial=step, desc="training", unit="step", disable=not progress, leave=False)
    epoch = step // steps_per_epoch
    while step < total:
        loader = _loader(accelerator, dataset, collate, cfg, epoch, lengths)
        if step - epoch * steps_per_epoch:
            loader = accelerator.skip_first_batches(loader, step - epoch * steps_per_epoch)
        for batch in loader:
            with accelerator.autocast():
                loss = loss_fn(model, batch)
            accelerator.backward(loss)
            if cfg.max_grad_norm:
                accelerator.clip_grad_norm_(params, cfg.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            step += 1
            result.losses.append(float(loss.detach()))
            result.examples_seen += len(next(iter(batch.values())))
            bar.update(1)
            bar.set_postfix(loss=f"{result.losses[-1]:.3f}")
            last_of_epoch = step % steps_per_epoch == 0
            if on_epoch_end is not None and (last_of_epoch or step >= total):
                selection.epoch_end(accelerator, model)
            # An epoch's end is a checkpoint too, unless the last one is recent: a small training set has an
            # epoch every few steps, and a full state (weights and optimiser, ~270 MB for MiniLM) each time cost
            # more than the steps (128 sentences: 56 epochs in 226 steps).
            due = step % cfg.checkpoint_every == 0 or (
                last_of_epoch and step - saved_at >= max(1, cfg.checkpoint_every // 4))
            if _progress_file(cfg) is not None and due and step < total:
                _checkpoint(accelerator, cfg, step, result, _segment(result, step, t0))
                saved_at = step
            if cfg.stop_after_steps is not None and step - result.resumed_from_step >= cfg.stop_after_steps:
                bar.close()
                if _progress_file(cfg) is not None:
                    _checkpoint(accelerator, cfg, step, result, _segment(result, step, t0))
                _finish(result, step, t0)
                return result
            if step >= total:
                break
        epoch += 1
    bar.close()
    selection.restore(accelerator, model)
    model.eval()
    _finish(result, step, t0)
    result.epochs_run = round(step / steps_per_epoch, 3)
    return result


def _segment(result: TrainResult, step: int, t0: float) -> dict:
    """This process's part of the run so far, as the progress file keeps it."""
    from . import devices, provenance

    return {"from_step": result.resumed_from_step, "to_step": step, "wall_s": round(time.perf_counter() - t0, 3),
            "peak_rss_mb": provenance.peak_rss_mb(), "device": devices.describe(devices.current())}


def _finish(result: TrainResult, step: int, t0: float) -> None:
    """The counters of a finished (or stopped) run: its wall time and peak RSS over every segment."""
    result.segments = [*result.segments, _segment(result, step, t0)]
    result.steps = step
    result.wall_s = sum(s["wall_s"] for s in result.segments)
    result.peak_rss_mb = max(s["peak_rss_mb"] for s in result.segments)


def checkpoint_activations(model: torch.nn.Module) -> None:
    """Turn on transformers' activation checkpointing in the (outermost) transformers model inside `model`,
    which may be wrapped (peft). Non-reentrant: it needs no input that requires grad, so a LoRA model whose
    embeddings are frozen still gets gradients."""
    from transformers import PreTrainedModel

    inner = next((m for m in model.modules() if isinstance(m, PreTrainedModel)), None)
    if inner is None or not inner.supports_gradient_checkpointing:
        raise BertevalError(f"activation checkpointing needs a transformers model that supports it; "
                            f"{type(model).__name__} does not")
    inner.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})


CHECKPOINT_WEIGHTS = "model.safetensors"  # accelerate's file for the first prepared model's weights


def _save_trained_weights_only(accelerator) -> None:
    """Checkpoints keep only the weights that train. A LoRA run's frozen weights are the base model's, loaded
    again from it when the run restarts, so saving them wrote ~90 MB per checkpoint for MiniLM where the
    trained ones are ~4 MB: small enough to commit a long run's resume state (files under 9.5 MiB) when the
    machine may be replaced before it ends. A full fine-tune trains every weight and saves them all."""
    def trainable(model) -> set[str]:
        return {n for n, p in accelerator.unwrap_model(model).named_parameters() if p.requires_grad}

    def before_save(models, weights, output_dir) -> None:
        for model, state in zip(models, weights):
            keep = trainable(model)
            for name in [n for n in state if n not in keep]:
                del state[name]

    def before_load(models, input_dir) -> None:
        from safetensors.torch import load_file

        path = Path(input_dir) / CHECKPOINT_WEIGHTS
        if len(models) != 1 or not path.is_file():
            return  # several models or another file layout: accelerate loads them as it saved them
        model = accelerator.unwrap_model(models[0])
        state = load_file(str(path))
        names = {n for n, _ in model.named_parameters()} | {n for n, _ in model.named_buffers()}
        unknown, untrained = set(state) - names, trainable(models[0]) - set(state)
        if unknown or untrained:
            raise BertevalError(f"the checkpoint in {input_dir} is not this run's: "
                                f"{len(unknown)} weights it does not have, {len(untrained)} trained weights missing "
                                f"(e.g. {sorted(unknown or untrained)[0]}). Remove the folder to start again.")
        model.load_state_dict(state, strict=False)  # the rest are frozen: the base model's, loaded already
        models.pop(0)  # loaded here; accelerate's own loader would insist on every weight

    accelerator.register_save_state_pre_hook(before_save)
    accelerator.register_load_state_pre_hook(before_load)


def _resumable(root: Path) -> Path | None:
    """The progress file a run in checkpoint folder `root` resumes from, None for a fresh start. Normally
    state/progress.json. A kill between the two renames of a checkpoint swap leaves no state folder: the staged
    one is whole if it holds its progress file (written last), else the previous one is. An older berteval kept
    progress.json beside the state folder."""
    if (root / STATE).is_dir():
        return next((p for p in (root / STATE / PROGRESS, root / PROGRESS) if p.is_file()), None)
    return next((root / n / PROGRESS for n in (STAGED, PREVIOUS) if (root / n / PROGRESS).is_file()), None)


def checkpoint_step(checkpoint_dir: Path | None) -> int:
    """The step a run with this checkpoint folder resumes from (0: it starts afresh); reads, changes nothing."""
    progress = _resumable(Path(checkpoint_dir)) if checkpoint_dir is not None else None
    return int(json.loads(progress.read_text())["step"]) if progress is not None else 0


def _recover(accelerator, cfg: TrainConfig) -> None:
    """Put the checkpoint _resumable found where a resume reads it: state/, with its progress file inside."""
    if accelerator.is_main_process:
        root = cfg.checkpoint_dir
        progress = _resumable(root)
        if progress is not None and progress.parent == root:  # an older berteval's layout: the file moves in
            os.replace(progress, root / STATE / PROGRESS)
        elif progress is not None and progress.parent != root / STATE:  # a swap cut between its renames
            os.replace(progress.parent, root / STATE)
    accelerator.wait_for_everyone()


def _resume(accelerator, cfg: TrainConfig) -> TrainResult:
    """A fresh result, or the state of the last checkpoint (weights, optimiser, step, epoch scores)."""
    result = TrainResult(steps=0)
    pfile = _progress_file(cfg)
    if pfile is not None:
        _recover(accelerator, cfg)
    if pfile is not None and pfile.is_file():
        accelerator.load_state(str(cfg.checkpoint_dir / STATE))
        saved = json.loads(pfile.read_text())
        result.resumed_from_step = saved["step"]
        result.epoch_scores, result.best_epoch = saved.get("epoch_scores", []), saved.get("best_epoch")
        # The counters of the steps before the kill travel with the checkpoint: a resumed run's record says
        # what the whole run saw (its first loss, every example), not only what this process did.
        result.losses = list(saved.get("losses", []))
        result.examples_seen = int(saved.get("examples_seen", 0))
        result.segments = list(saved.get("segments", []))
    return result


def _checkpoint(accelerator, cfg: TrainConfig, step: int, result: TrainResult, segment: dict) -> None:
    """Write the state beside the old one, its progress file last, then swap, so a kill mid-write keeps the
    last good checkpoint and the counters always describe the weights beside them. Every process calls
    save_state (it holds barriers); only the main one writes the progress file and swaps."""
    tmp, final, old = (cfg.checkpoint_dir / n for n in (STAGED, STATE, PREVIOUS))
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        write_atomic(tmp / PROGRESS, json.dumps({"step": step, "epoch_scores": result.epoch_scores,
                                                 "best_epoch": result.best_epoch, "losses": result.losses,
                                                 "examples_seen": result.examples_seen,
                                                 "segments": [*result.segments, segment]}).encode("utf-8"))
        shutil.rmtree(old, ignore_errors=True)
        if final.exists():
            os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
        (cfg.checkpoint_dir / PROGRESS).unlink(missing_ok=True)  # an older berteval's, beside the folder
    accelerator.wait_for_everyone()


MMAP_THRESHOLD = 4 << 20  # bytes; see lean_heap
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number in glibc's malloc.h


def lean_heap() -> bool:
    """Fix glibc's mmap threshold at MMAP_THRESHOLD for the rest of the process, so that a freed block of
    4 MiB or more goes back to the system at once. By default glibc raises the threshold (up to 32 MiB) each
    time such a block is freed, after which blocks of up to 32 MiB come from the heap and stay there: a
    length-grouped fine-tune changes batch shape every step, the freed blocks of one shape do not fit the
    next, and the heap grows step after step (8 LoRA steps of 64-384-token batches: 2,554 MB peak by default,
    1,837 MB with the threshold fixed; a whole SQuAD fine-tune: docs/performance.md). Allocation only: the
    numbers computed are the same. False where the C library is not glibc (nothing changed)."""
    import ctypes

    try:
        return bool(ctypes.CDLL("libc.so.6").mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    except (OSError, AttributeError):
        return False


def release_memory() -> None:
    """Hand memory freed by training (optimiser state, activations, gradients) back to the OS before the
    evaluation allocates its own: glibc keeps freed blocks in its arenas otherwise, and the process's
    peak is training's plus evaluation's instead of the larger of the two."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim
        pass


def clear_checkpoint(cfg: TrainConfig) -> None:
    """A finished run's checkpoint is no longer needed (its record is written)."""
    if cfg.checkpoint_dir is not None:
        shutil.rmtree(cfg.checkpoint_dir, ignore_errors=True)
