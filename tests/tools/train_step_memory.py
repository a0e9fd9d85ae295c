"""Peak memory of one SQuAD fine-tune step, with and without activation checkpointing (issue 17, memory).

Each setting runs in a fresh process (ru_maxrss is a process's high-water mark): the default model,
the LoRA recipe, one batch of 32 windows of 384 tokens (the longest a SQuAD batch gets) under bf16
autocast, forward and backward. Prints peak RSS and the step's wall time per setting; compare within
one run on a quiet machine.

    python tests/tools/train_step_memory.py            # both settings
"""

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # berteval from this checkout


def one_step(checkpointing: bool, batch: int, length: int, dtype: str) -> None:
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
    ids = torch.randint(1000, 20000, (batch, length))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    with autocast(dtype):
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids),
                    start_positions=torch.randint(0, length, (batch,)), end_positions=torch.randint(0, length, (batch,)))
    out.loss.backward()
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"activation checkpointing {'on ' if checkpointing else 'off'}: peak RSS {peak:,.0f} MB "
          f"(model loaded: {before:,.0f} MB), step {wall:.1f} s ({batch} x {length} tokens, {dtype})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--length", type=int, default=384)
    ap.add_argument("--dtype", default="bf16", choices=("fp32", "bf16"))
    ap.add_argument("--only", choices=("on", "off"), help="run one setting in this process (used internally)")
    args = ap.parse_args()
    if args.only:
        one_step(args.only == "on", args.batch, args.length, args.dtype)
        return
    for setting in ("off", "on"):
        subprocess.run([sys.executable, __file__, "--only", setting, "--batch", str(args.batch),
                        "--length", str(args.length), "--dtype", args.dtype], check=True)


if __name__ == "__main__":
    main()
