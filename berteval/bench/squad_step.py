"""What one training step of the SQuAD span-QA fine-tune costs, under the settings that could make it cheaper.

Issue 26 asks for the step time of the full-train-set fine-tune before and after whatever speeds it: the usual
baseline pads every window to the window length (384: transformers' `run_qa.py` does), berteval's runs pad a
batch to its longest window and group windows of similar length (`training.LengthGroupedBatches`), and
`--dtype bf16` trains under bf16 autocast. Each setting here times real steps of the `lora-plus` recipe
(`regimes.tuning.LORA_PLUS` built on `qa.inference.head_model`, AdamW with the run's parameter groups and
schedule, `training._optimiser`; gradient clipping; activation checkpointing and the fixed mmap threshold as a
span-QA fine-tune runs them by default) on real training windows, cut by `qa.windows.make_windows` exactly as
`regimes/span.py` cuts them, from the train set the run reads (the full reconstructed set when the data folder
has it, else the 17-article subset).

The same windows in every setting: a pool of windows is drawn (seeded) from the whole train set; the run's own
length-grouped sampler deals the pool into batches (a pool of 1,600 is one of its 50-batch chunks, so the
batches are as tight as the run's); the warm-up batch is the longest of them and the timed batches are spread
evenly over the rest by length (a stratified sample). The random-batch settings deal those same timed windows
into random batches, so every setting at the recipe's batch size trains on identical windows; a larger batch,
when asked for, is dealt from the same pool. Each setting starts from the same seeded initialisation.

One epoch is projected, not run: the timed steps' seconds per padded FLOP (`encoders.encoder_flops` of the
padded batches) times the padded FLOPs of one epoch over every training window batched that way (the run's
sampler with the run's generator for length-grouped batches, a seeded permutation for random ones). Runs in the
bench's process: `training.lean_heap` fixes glibc's mmap threshold for the rest of the process, so the bench
runs this section after the others.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ..errors import BertevalError

SEED = 0
POOL = 1600  # windows drawn from the train set: one chunk of the run's sampler (50 batches of 32)
STEPS = 6  # timed steps per setting, after one warm-up step
CHUNK = 2000  # questions per make_windows call: the same windows, without holding every window's offsets at once


@dataclass(frozen=True)
class Setting:
    name: str
    padding: str  # "max_length" (every window padded to the window length) or "longest" (the batch's longest)
    batches: str  # "random" or "grouped" (training.LengthGroupedBatches)
    dtype: str  # "fp32" or "bf16" (autocast over fp32 weights, as `--dtype bf16` trains)
    batch_size: int


def settings(max_length: int, batch: int, large_batch: int = 0) -> list[Setting]:
    """The settings in the order they run and are reported; ratios are against the first."""
    out = [Setting(f"padded to {max_length}, fp32, random batches", "max_length", "random", "fp32", batch),
           Setting("padded to the batch's longest, fp32, random batches", "longest", "random", "fp32", batch),
           Setting("length-grouped, fp32", "longest", "grouped", "fp32", batch),
           Setting("length-grouped, bf16 autocast", "longest", "grouped", "bf16", batch)]
    if large_batch:
        out.append(Setting(f"length-grouped, bf16 autocast, batch {large_batch}", "longest", "grouped", "bf16",
                           large_batch))
    return out


@dataclass
class TrainWindows:
    """Every training window of the train set, compactly: token arrays and labels, no character offsets."""

    source: str  # which train file
    n_questions: int
    features: list[dict]  # per window: key -> int32 array (unpadded)
    lengths: np.ndarray  # (W,)
    start_positions: np.ndarray  # (W,)
    end_positions: np.ndarray  # (W,)

    def __len__(self) -> int:
        return len(self.features)


@dataclass
class StepTiming:
    setting: str
    padding: str
    batches: str
    dtype: str  # "fp32" or "bf16 (autocast)"
    batch_size: int
    same_windows: bool  # trained on the same windows as the first setting
    steps: int  # timed steps (after one warm-up)
    windows: int  # windows in the timed steps
    real_tokens: int  # their tokens, padding not counted
    s_per_step: float  # median of the timed steps
    step_times_s: list[float]
    windows_per_s: float  # timed windows / timed seconds
    tokens_per_s: float  # real (non-pad) tokens / timed seconds
    padding_share: float  # share of the computed positions that were padding, timed steps
    mean_loss: float
    peak_mb: float | None  # peak RSS during the setting (VmHWM reset before it); None where it cannot be reset
    epoch_steps: int
    epoch_padding_share: float  # share of padding over one whole epoch batched this way
    epoch_s: float  # projected wall time of one epoch over every training window


@dataclass
class SquadStep:
    model: str
    machine: str
    train_source: str
    n_questions: int
    n_windows: int
    mean_window_tokens: float
    max_length: int
    doc_stride: int
    recipe: str
    trained: str
    lr: float
    activation_checkpointing: bool
    mmap_threshold_mb: int | None
    pool: int
    seed: int
    timed_windows: int  # per setting at the recipe's batch size
    rows: list[StepTiming] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)


def train_set_of(folder: Path) -> str:
    """The train set `--train-set full` reads when the data folder has it, else the subset every run reads."""
    from ..tasks import squad

    return "full" if any((Path(folder) / "squad" / n).is_file() for n in squad.FULL_FILES) else "subset"


def train_windows(tokenizer, folder: Path, max_length: int, doc_stride: int, log=print) -> TrainWindows:
    """Every training window, cut as `regimes.span._SpanRegime.prepare` cuts them (questions with an answer,
    the first answer as the label). Windows are per question, so cutting a chunk of questions at a time gives
    the same windows; only their token arrays and labels are kept."""
    from ..qa.windows import make_windows
    from ..tasks import squad

    train_set = train_set_of(folder)
    log(f"squad-step: reading the SQuAD train set ({train_set}) ...")
    data = squad.load(folder, train_set=train_set)
    train = data.train
    ex = [i for i, gold in enumerate(train.labels) if gold.texts]
    feats, starts, ends = [], [], []
    t0 = time.perf_counter()
    for i in range(0, len(ex), CHUNK):
        part = ex[i : i + CHUNK]
        w = make_windows(tokenizer, [train.texts[k][0] for k in part], [train.texts[k][1] for k in part],
                         max_length=max_length, doc_stride=doc_stride,
                         answer_starts=[train.labels[k].starts[0] for k in part],
                         answer_texts=[train.labels[k].texts[0] for k in part])
        feats += [{k: np.asarray(v, dtype=np.int32) for k, v in f.items()} for f in w.features]
        starts.append(w.start_positions)
        ends.append(w.end_positions)
        if len(ex) > CHUNK:
            log(f"squad-step: windows of {min(i + CHUNK, len(ex)):,} of {len(ex):,} questions "
                f"({time.perf_counter() - t0:.0f} s)")
    lengths = np.array([len(f["input_ids"]) for f in feats], dtype=np.int64)
    return TrainWindows(data.details.get("train_source") or train_set, len(ex), feats, lengths,
                        np.concatenate(starts), np.concatenate(ends))


def _grouped(lengths, batch: int, seed: int) -> list[list[int]]:
    """The run's length-grouped batches over these lengths, with the generator of the run's first epoch."""
    from ..seeds import torch_generator
    from ..training import LengthGroupedBatches

    return LengthGroupedBatches(lengths, batch, torch_generator(seed * 1000, "train"))._batches()


def pick_batches(pool_lengths: np.ndarray, batch: int, steps: int, seed: int) -> list[list[int]]:
    """[warm-up, *timed] batches of pool positions: the pool dealt by the run's sampler; the longest full batch
    warms up (it allocates the largest shapes first); the timed ones are spread evenly by length over the rest,
    from a seeded offset, in a seeded order."""
    from ..seeds import numpy_rng

    full = [b for b in _grouped(pool_lengths, batch, seed) if len(b) == batch]
    if len(full) < steps + 1:
        raise BertevalError(f"squad-step: a pool of {len(pool_lengths):,} windows makes {len(full)} full batches of "
                            f"{batch}; {steps} timed steps and a warm-up need {steps + 1}: raise "
                            f"--squad-step-sample or lower --squad-step-steps")
    full.sort(key=lambda b: -int(pool_lengths[b].max()))
    warm, rest = full[0], full[1:]
    rng = numpy_rng(seed, "sizes")
    u = float(rng.random())
    timed = [rest[int((k + u) * len(rest) / steps)] for k in range(steps)]
    return [warm] + [timed[i] for i in rng.permutation(steps)]


def random_batches(timed: list[list[int]], batch: int, seed: int) -> list[list[int]]:
    """The same windows as `timed`, dealt into random batches (seeded)."""
    from ..seeds import numpy_rng

    flat = np.concatenate([np.asarray(b) for b in timed])
    flat = flat[numpy_rng(seed, "loader").permutation(len(flat))]
    return [flat[i : i + batch].tolist() for i in range(0, len(flat), batch)]


def epoch_padded_lengths(lengths: np.ndarray, setting: Setting, max_length: int, seed: int) -> np.ndarray:
    """Each training window's padded length in one epoch batched as `setting` batches."""
    import torch

    from ..seeds import torch_generator

    if setting.padding == "max_length":
        return np.full(len(lengths), max_length, dtype=np.int64)
    if setting.batches == "grouped":
        batches = _grouped(lengths, setting.batch_size, seed)
    else:
        perm = torch.randperm(len(lengths), generator=torch_generator(seed * 1000, "train")).numpy()
        batches = [perm[i : i + setting.batch_size] for i in range(0, len(perm), setting.batch_size)]
    out = np.empty(len(lengths), dtype=np.int64)
    for b in batches:
        out[b] = lengths[b].max()
    return out


def _flops_config(config) -> SimpleNamespace:
    """What `encoder_flops` reads, from a BERT or DistilBERT config."""
    h = config.hidden_size
    return SimpleNamespace(hidden_size=h, num_hidden_layers=config.num_hidden_layers,
                           intermediate_size=getattr(config, "intermediate_size", getattr(config, "hidden_dim", 4 * h)))


def _reset_peak() -> bool:
    """Reset this process's VmHWM to its current RSS (Linux: clear_refs 5), so a setting's peak is its own."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def time_setting(loaded, tw: TrainWindows, setting: Setting, batches: list[list[int]], *, max_length: int,
                 lr: float, total_steps: int, checkpointing: bool, seed: int = SEED,
                 log=print) -> tuple[list[float], list[float], int, int, int, float | None]:
    """Train `batches` (the first a warm-up) from a fresh seeded lora-plus model, one step at a time as
    `training.train` steps: collate, forward under the setting's precision, backward, clipping, AdamW, schedule.
    Returns (step seconds, losses, real tokens, padded positions, windows) of the timed steps and the peak MB."""
    import torch

    from .. import devices, precision, provenance, training
    from ..qa.heads import qa_loss
    from ..qa.inference import head_model
    from ..regimes import tuning

    training.release_memory()
    torch.manual_seed(seed)  # LoRA's and the span head's initialisation: the same in every setting
    module = tuning.LORA_PLUS.build(head_model(loaded))
    if checkpointing:
        training.checkpoint_activations(module)
    module.train()
    cfg = training.TrainConfig(batch_size=setting.batch_size, lr=lr, seed=seed, dtype=setting.dtype)
    params, optimizer, scheduler = training._optimiser(module, cfg, total_steps)
    tokenizer = loaded.tokenizer
    pad = {"padding": "max_length", "max_length": max_length} if setting.padding == "max_length" else {}
    cuda = devices.current().type == "cuda"
    peak_ok = _reset_peak()
    times, losses, real, padded, windows = [], [], 0, 0, 0
    for i, idx in enumerate(batches):
        t0 = time.perf_counter()
        batch = dict(tokenizer.pad([{k: v.tolist() for k, v in tw.features[j].items()} for j in idx],
                                   return_tensors="pt", **pad))
        batch["start_positions"] = torch.as_tensor(tw.start_positions[idx])
        batch["end_positions"] = torch.as_tensor(tw.end_positions[idx])
        batch = devices.to(batch)
        with precision.autocast(setting.dtype):
            loss = qa_loss(module, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        value = float(loss.detach())  # the run reads every step's loss too
        if cuda:
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        log(f"squad-step: {setting.name}: {'warm-up' if i == 0 else f'step {i}'} "
            f"({len(idx)} x {batch['input_ids'].shape[1]} tokens) {dt:.2f} s, loss {value:.3f}")
        if i:
            times.append(dt)
            losses.append(value)
            real += int(batch["attention_mask"].sum())
            padded += int(batch["attention_mask"].numel())
            windows += len(idx)
    peak = provenance.peak_rss_mb() if peak_ok else None
    del module, optimizer, scheduler, params
    training.release_memory()
    return times, losses, real, padded, windows, peak


def measure(model: str, folder: Path, *, max_length: int = 384, doc_stride: int | None = None, steps: int = STEPS,
            pool: int = POOL, batch: int | None = None, large_batch: int = 0, checkpointing: bool = True,
            threads: int | None = None, seed: int = SEED, log=print) -> SquadStep:
    import torch

    from .. import models, training
    from ..regimes import tuning
    from ..seeds import numpy_rng
    from .encoders import _stride, encoder_flops, machine

    if threads:
        torch.set_num_threads(threads)
    recipe = tuning.LORA_PLUS
    batch = batch or recipe.defaults["batch_size"]
    doc_stride = doc_stride or _stride(max_length)
    if steps < 1:
        raise BertevalError("--squad-step-steps: at least 1")
    loaded = models.load(model)
    tw = train_windows(loaded.tokenizer, folder, max_length, doc_stride, log=log)
    if len(tw) < (steps + 1) * max(batch, large_batch):
        raise BertevalError(f"squad-step: the train set has {len(tw):,} windows, fewer than {steps + 1} batches of "
                            f"{max(batch, large_batch)}")
    pool_idx = np.sort(numpy_rng(seed, "subset").choice(len(tw), size=min(pool, len(tw)), replace=False))
    pool_lengths = tw.lengths[pool_idx]
    lean = training.lean_heap() if checkpointing else False  # as training.train does with checkpointing on
    flops_cfg = _flops_config(loaded.encoder.config)
    rep = SquadStep(model, machine(), tw.source, tw.n_questions, len(tw), round(float(tw.lengths.mean()), 1),
                    max_length, doc_stride, recipe.name, recipe.trained, recipe.defaults["lr"], checkpointing,
                    (training.MMAP_THRESHOLD >> 20) if lean else None, len(pool_idx), seed, steps * batch)
    dealt: dict[int, list[list[int]]] = {}
    for s in settings(max_length, batch, large_batch):
        if s.batch_size not in dealt:
            dealt[s.batch_size] = [pool_idx[b].tolist() for b in pick_batches(pool_lengths, s.batch_size, steps, seed)]
        grouped = dealt[s.batch_size]
        chosen = grouped if s.batches == "grouped" else [grouped[0], *random_batches(grouped[1:], s.batch_size, seed)]
        epoch_steps = -(-len(tw) // s.batch_size)
        times, losses, real, padded, windows, peak = time_setting(
            loaded, tw, s, chosen, max_length=max_length, lr=recipe.defaults["lr"],
            total_steps=int(recipe.defaults["epochs"] * epoch_steps), checkpointing=checkpointing, seed=seed, log=log)
        # seconds per padded FLOP of the timed steps, times the padded FLOPs of one epoch batched this way
        timed_pad = np.concatenate([np.full(len(b), max_length if s.padding == "max_length" else tw.lengths[b].max())
                                    for b in chosen[1:]])
        epoch_pad = epoch_padded_lengths(tw.lengths, s, max_length, seed)
        per_flop = sum(times) / encoder_flops(flops_cfg, timed_pad)
        wall = sum(times)
        rep.rows.append(StepTiming(
            s.name, s.padding, s.batches, "bf16 (autocast)" if s.dtype == "bf16" else "fp32", s.batch_size,
            s.batch_size == batch, len(times), windows, real, round(statistics.median(times), 3),
            [round(t, 3) for t in times], round(windows / wall, 2), round(real / wall, 1),
            round(1 - real / padded, 4), round(float(np.mean(losses)), 4), peak, epoch_steps,
            round(1 - float(tw.lengths.sum() / epoch_pad.sum()), 4),
            round(per_flop * encoder_flops(flops_cfg, epoch_pad), 1)))
    return rep


def _hours(s: float) -> str:
    return f"{int(s // 3600)}:{int(s % 3600 // 60):02d}:{int(s % 60):02d}"


def format_squad_step(rep: SquadStep) -> str:
    rows, first = rep.rows, rep.rows[0]
    width = max(len("setting"), *(len(r.setting) for r in rows))
    heap = f", glibc mmap threshold fixed at {rep.mmap_threshold_mb} MiB" if rep.mmap_threshold_mb else ""
    checkpointing = (f"on{heap} (what span-QA fine-tunes run by default)" if rep.activation_checkpointing
                     else "off (as --no-activation-checkpointing)")
    lines = [
        f"SQuAD span-QA fine-tune steps, model {rep.model}; {rep.machine}",
        f"recipe {rep.recipe} ({rep.trained}), AdamW lr {rep.lr:g}, gradient clipping; activation checkpointing "
        f"{checkpointing}",
        f"train set: {rep.train_source}",
        f"  {rep.n_questions:,} questions -> {rep.n_windows:,} windows of at most {rep.max_length} tokens "
        f"(doc stride {rep.doc_stride}; mean {rep.mean_window_tokens:.1f} tokens)",
        f"timed: {first.steps} steps after 1 warm-up per setting; the batch-{first.batch_size} settings on the same "
        f"{rep.timed_windows:,} windows, from a pool of {rep.pool:,} drawn with seed {rep.seed}",
        f"{'setting':<{width}} {'s/step':>7} {'windows/s':>9} {'tokens/s':>9} {'pad':>5} {'peak MB':>8} "
        f"{'epoch pad':>9} {'epoch':>8} {'s/step x':>8} {'tokens/s x':>10} {'epoch x':>7}"]
    for r in rows:
        peak = f"{r.peak_mb:>8,.0f}" if r.peak_mb is not None else f"{'-':>8}"
        lines.append(
            f"{r.setting:<{width}} {r.s_per_step:>7.2f} {r.windows_per_s:>9.2f} {r.tokens_per_s:>9,.0f} "
            f"{r.padding_share:>5.0%} {peak} {r.epoch_padding_share:>9.0%} {_hours(r.epoch_s):>8} "
            f"{r.s_per_step / first.s_per_step:>8.2f} {r.tokens_per_s / first.tokens_per_s:>10.2f} "
            f"{r.epoch_s / first.epoch_s:>7.2f}")
    lines += [
        "s/step: median of the timed steps; windows/s, tokens/s (real tokens, padding not counted) and pad (share of "
        "the computed positions that were padding): over the timed steps; peak MB: the process's peak RSS during "
        "the setting",
        f"epoch: one epoch over all {rep.n_windows:,} windows, projected (h:mm:ss) = the timed steps' seconds per "
        "padded FLOP x the padded FLOPs of the epoch batched that way (epoch pad: its padding share; the recipe "
        "runs 2 epochs); x: this setting / the first"]
    if any(not r.same_windows for r in rows):
        lines.append("a larger batch trains on other windows of the same pool (the same number of steps)")
    return "\n".join(lines)
