"""Peak memory of SQuAD fine-tune steps: activation checkpointing on/off, and glibc allocator settings.

Each setting runs in a fresh process (ru_maxrss is a process's high-water mark): the default model,
the LoRA recipe, AdamW, batches of 32 windows under bf16 autocast, forward, backward and an optimiser
step. With `--steps 1` (the default) one batch of the longest windows (384 tokens); with more steps
the batch lengths vary as SQuAD's length-grouped batches do (uniform 64-384 tokens), which is what
lets freed blocks of one shape sit unused in the allocator's arenas while the next shape asks for new
ones. Prints, per setting, peak RSS after the first step and after the last, the RSS at the end and
seconds per step; compare within one run on a quiet machine.

    python tests/tools/train_step_memory.py                          # one step, checkpointing off vs on
    python tests/tools/train_step_memory.py --steps 20 --allocators  # 20 steps, checkpointing on, per allocator setting
"""

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # berteval from this checkout

# glibc's allocator, set through its environment tunables before the process starts. By default the
# mmap threshold grows (up to 32 MiB) after a large block is freed, so blocks below it come from the
# heap and stay there; a fixed threshold hands them back to the system when freed.
ALLOCATORS = {"glibc default": {}, "mmap threshold 1 MiB (fixed)": {"MALLOC_MMAP_THRESHOLD_": str(1 << 20)},
              "mmap threshold 4 MiB (fixed)": {"MALLOC_MMAP_THRESHOLD_": str(4 << 20)},
              "2 arenas": {"MALLOC_ARENA_MAX": "2"},
              # not a tunable: this tool's own switch, handing free heap pages back after every optimiser step
              "malloc_trim after every step": {"TRAIN_STEP_MEMORY_TRIM": "1"}}


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run(checkpointing: bool, batch: int, length: int, dtype: str, steps: int) -> None:
    import torch

    from berteval import models, training
    from berteval.precision import autocast
    from berteval.qa import recipes
    from berteval.qa.inference import head_model

    torch.manual_seed(0)
    model = recipes.LORA.build(head_model(models.load("default")))
    if checkpointing:
        training.checkpoint_activations(model)
    model.train()
    optimiser = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    lengths = [length] if steps == 1 else torch.randint(64, length + 1, (steps,)).tolist()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    first, t0 = None, time.perf_counter()
    for n in lengths:
        ids = torch.randint(1000, 20000, (batch, n))
        with autocast(dtype):
            out = model(input_ids=ids, attention_mask=torch.ones_like(ids),
                        start_positions=torch.randint(0, n, (batch,)), end_positions=torch.randint(0, n, (batch,)))
        out.loss.backward()
        optimiser.step()
        optimiser.zero_grad()
        if os.environ.get("TRAIN_STEP_MEMORY_TRIM"):
            training.release_memory()
        first = first or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    wall = (time.perf_counter() - t0) / len(lengths)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    env = {k: v for k, v in os.environ.items() if k.startswith(("MALLOC_", "TRAIN_STEP_MEMORY_"))}
    print(f"checkpointing {'on ' if checkpointing else 'off'} {env or 'glibc default'}: peak RSS after step 1 "
          f"{first:,.0f} MB, after {len(lengths)} {peak:,.0f} MB, RSS now {_rss_mb():,.0f} MB (model loaded: "
          f"{before:,.0f} MB); {wall:.1f} s/step ({batch} windows, {dtype})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--length", type=int, default=384, help="tokens per window (the longest, with --steps > 1)")
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--dtype", default="bf16", choices=("fp32", "bf16"))
    ap.add_argument("--allocators", action="store_true",
                    help="checkpointing on, once per glibc allocator setting (instead of checkpointing off vs on)")
    ap.add_argument("--only", choices=("on", "off"), help="run one setting in this process (used internally)")
    args = ap.parse_args()
    common = ["--batch", str(args.batch), "--length", str(args.length), "--dtype", args.dtype, "--steps", str(args.steps)]
    if args.only:
        run(args.only == "on", args.batch, args.length, args.dtype, args.steps)
        return
    settings = ([("on", env) for env in ALLOCATORS.values()] if args.allocators else [("off", {}), ("on", {})])
    for setting, env in settings:
        subprocess.run([sys.executable, __file__, "--only", setting, *common], check=True,
                       env={**os.environ, **env})


if __name__ == "__main__":
    main()
