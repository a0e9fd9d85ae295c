"""Memory of span-QA fine-tune steps: what recomputing activations and a fixed mmap threshold each save.

Each setting runs in a fresh process (a process's peak RSS is a high-water mark: settings run one after another
in one process would hide each other). A process builds the model with the committed `finetune` recipe (LoRA on
every encoder linear layer + span head), AdamW, and trains `steps` batches of `batch` windows under bf16
autocast, as `berteval run --task squad --regime finetune --dtype bf16` does. The first batch is the longest
(`length` tokens); the rest vary uniformly from 64 tokens up, as SQuAD's length-grouped batches do: that is
what lets freed blocks of one shape sit in glibc's heap while the next shape asks for new ones.

The settings are the library's own switches (`training.checkpoint_activations`, `training.lean_heap`), so the
figures are those of what a fine-tune runs, not of a copy of it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

# name -> (recompute activations, fixed mmap threshold); the last is what span-QA fine-tunes run
SETTINGS = {
    "keep activations, glibc default heap": (False, False),
    "recompute activations, glibc default heap": (True, False),
    "recompute activations, mmap threshold fixed (fine-tunes)": (True, True),
}


@dataclass
class StepMemory:
    setting: str
    steps: int
    batch: int
    model_mb: float  # peak RSS once the model is built, before the first step
    first_step_mb: float  # peak RSS after the first (longest) step
    peak_mb: float  # peak RSS after the last step
    end_mb: float  # RSS after the last step: what the heap kept
    s_per_step: float


def measure(setting: str, model: str, steps: int, batch: int, length: int, seed: int = 0) -> StepMemory:
    """One setting in this process (call it in a fresh one)."""
    import torch

    from .. import models, provenance, training
    from ..precision import autocast
    from ..qa.inference import head_model
    from ..regimes import tuning

    recompute, lean = SETTINGS[setting]
    torch.manual_seed(seed)
    module = tuning.LORA.build(head_model(models.load(model)))
    if recompute:
        training.checkpoint_activations(module)
    if lean:
        training.lean_heap()
    module.train()
    optimiser = torch.optim.AdamW([p for p in module.parameters() if p.requires_grad], lr=1e-4)
    vocab = module.config.vocab_size
    lengths = [length] + torch.randint(min(64, length), length + 1, (steps - 1,)).tolist()
    model_mb, first, t0 = provenance.peak_rss_mb(), None, time.perf_counter()
    for n in lengths:
        ids = torch.randint(min(1000, vocab - 1), vocab, (batch, n))
        with autocast("bf16"):
            out = module(input_ids=ids, attention_mask=torch.ones_like(ids),
                         start_positions=torch.randint(0, n, (batch,)), end_positions=torch.randint(0, n, (batch,)))
        out.loss.backward()
        optimiser.step()
        optimiser.zero_grad()
        first = first or provenance.peak_rss_mb()
    wall = (time.perf_counter() - t0) / len(lengths)
    return StepMemory(setting, len(lengths), batch, model_mb, first, provenance.peak_rss_mb(),
                      provenance.status_mb("VmRSS"), round(wall, 2))


def run_settings(model: str, steps: int = 8, batch: int = 32, length: int = 384, log=print) -> list[StepMemory]:
    """Every setting, each in its own process, in SETTINGS order."""
    rows = []
    for setting in SETTINGS:
        log(f"memory: {setting} ({steps} steps of {batch} windows) ...")
        args = json.dumps({"setting": setting, "model": model, "steps": steps, "batch": batch, "length": length})
        done = subprocess.run([sys.executable, "-m", "berteval.bench.memory", args], capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"the memory measurement '{setting}' failed:\n{done.stderr[-2000:]}")
        rows.append(StepMemory(**json.loads(done.stdout.strip().splitlines()[-1])))
    return rows


def format_memory(rows: list[StepMemory]) -> str:
    width = max(len(r.setting) for r in rows)
    lines = [f"{'fine-tune steps (LoRA, bf16): setting':<{width}} {'model MB':>9} {'step 1 MB':>10} "
             f"{'peak MB':>9} {'end MB':>8} {'s/step':>7}"]
    lines += [f"{r.setting:<{width}} {r.model_mb:>9,.0f} {r.first_step_mb:>10,.0f} {r.peak_mb:>9,.0f} "
              f"{r.end_mb:>8,.0f} {r.s_per_step:>7.2f}" for r in rows]
    lines.append(f"{rows[0].steps} steps of {rows[0].batch} windows, the first the longest; each setting in a fresh "
                 "process; MB = peak RSS (VmHWM) after the model was built / after step 1 / after the last step, "
                 "and RSS at the end")
    return "\n".join(lines)


if __name__ == "__main__":  # one setting, in the fresh process run_settings starts
    spec = json.loads(sys.argv[1])
    print(json.dumps(asdict(measure(**spec))))
