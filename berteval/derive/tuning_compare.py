"""Short runs that choose how issue 43's pair trains: LoRA or every encoder weight, at equal CPU time.

    nice -n 10 python -m berteval.derive.tuning_compare --data-dir ../shared/data --cpu-seconds 1800 \\
        --out comparison.json [--lr-lora 5e-4] [--lr-full 1e-4] [--threads 1]

Each mode continues the base (all-MiniLM-L6-v2 by default) on the same prepared examples (the pair's own:
the twins' Wikipedia text with the base's vocabulary), in the same batch order, masked LM alone (the
objective both twins share), for the same budget of this process's CPU seconds (`time.process_time`, so
other programs on a loaded machine do not count against a mode). Every `--eval-cpu-seconds` the held-out
masked-LM loss and accuracy are measured on a fixed held-out subset, outside the budget. The lr schedule is
warm-up then flat (the decay is tied to a budget the short run does not know; a flat lr favours neither
mode). Output: one JSON with each mode's curve (CPU seconds, steps, tokens, held-out loss/accuracy) and
which mode reached the lower final held-out loss.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

FLAT = 10**9  # steps of the schedule's decay: far beyond any short run, so the lr stays at its peak


def prepared_examples(base_path: str, data_dir: Path, seed: int, hyper: dict):
    from .. import config
    from ..pretrain import examples

    return examples.prepare(data_dir, config.cache_dir(), seed, {**hyper, "vocab": base_path})


def run_mode(prepared, base_path: str, tuning: str, lr: float, args, hyper: dict) -> dict:
    """One mode for `args.cpu_seconds` of this process's CPU time; its held-out curve."""
    from ..pretrain import loop
    from . import continued

    mode = {**hyper, "tuning": tuning, "lr": lr, "steps": FLAT, "long_share": 0.0}
    model = continued.base_model(base_path, args.seed, mode)
    params, opt, sched = loop._optimiser(model, mode, FLAT, nsp=False)
    plan = loop.schedule_plan(mode)
    plan["short_steps"] = args.max_steps  # only the order's length: the run stops on CPU time first
    orders = loop._orders(prepared, plan, args.seed)
    objective = loop.Objective(model, nsp=False)
    device = torch.device("cpu")
    heldout = prepared.heldout.take(np.arange(min(args.eval_sequences, len(prepared.heldout))))
    torch.manual_seed(args.seed)
    model.train()
    curve, spent, step, tokens, next_eval = [], 0.0, 0, 0, 0.0
    while spent < args.cpu_seconds and step < args.max_steps:
        if spent >= next_eval:
            curve.append({"cpu_s": round(spent, 1), "step": step, "tokens": tokens,
                          **loop.evaluate_sequences(model, heldout, device, args.dtype)})
            next_eval += args.eval_cpu_seconds
        t0 = time.process_time()
        batch = loop.batch_tensors(prepared.train, orders["short"][step * mode["batch_size"]:
                                                                        (step + 1) * mode["batch_size"]], device)
        loop.train_step(objective, batch, params, opt, sched, device, args.dtype, mode["max_grad_norm"])
        step, tokens = step + 1, tokens + int(batch["attention_mask"].sum())
        spent += time.process_time() - t0
    curve.append({"cpu_s": round(spent, 1), "step": step, "tokens": tokens,
                  **loop.evaluate_sequences(model, heldout, device, args.dtype)})
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {"tuning": tuning, "lr": lr, "trainable_parameters": trainable, "curve": curve,
            "tokens_per_cpu_s": round(tokens / max(1e-9, spent), 1)}


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m berteval.derive.tuning_compare", description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--base", default="default", help="the base encoder (default: the embedded all-MiniLM-L6-v2)")
    p.add_argument("--cpu-seconds", type=float, default=1800.0, help="each mode's budget of process CPU time")
    p.add_argument("--eval-cpu-seconds", type=float, default=300.0, help="held-out evaluation every this many")
    p.add_argument("--eval-sequences", type=int, default=512, help="held-out 128-token sequences scored")
    p.add_argument("--max-steps", type=int, default=100_000, help="a cap on steps (tests)")
    p.add_argument("--lr-lora", type=float, default=5e-4)
    p.add_argument("--lr-full", type=float, default=1e-4)
    p.add_argument("--limit-articles", type=int, help="prepare from the first N articles only (tests)")
    p.add_argument("--batch-size", type=int, help="override the recipe's 32")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="the JSON written")
    return p.parse_args(argv)


def main(argv=None) -> int:
    from .. import models
    from . import CONTINUED

    args = parse(argv)
    torch.set_num_threads(args.threads)
    hyper = {**CONTINUED, "limit_articles": args.limit_articles}
    if args.batch_size:
        hyper["batch_size"] = args.batch_size
    base = models.identify(args.base)
    prepared = prepared_examples(base.path, Path(args.data_dir), args.seed, hyper)
    if len(prepared.heldout) < args.eval_sequences:
        print(f"warning: only {len(prepared.heldout)} held-out sequences to score (asked {args.eval_sequences})")
    modes = [run_mode(prepared, base.path, t, lr, args, hyper) for t, lr in (("lora", args.lr_lora),
                                                                              ("full", args.lr_full))]
    best = min(modes, key=lambda m: m["curve"][-1]["mlm_loss"])
    result = {"base": base.model_id, "revision": base.revision, "examples": prepared.folder.name,
              "cpu_seconds_each": args.cpu_seconds, "threads": args.threads, "dtype": args.dtype,
              "batch_size": hyper["batch_size"], "modes": modes, "lower_heldout_mlm_loss": best["tuning"]}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for m in modes:
        last = m["curve"][-1]
        print(f"{m['tuning']}: {last['step']} steps, {last['tokens']:,} tokens in {last['cpu_s']} CPU-s; held-out "
              f"mlm loss {last['mlm_loss']} acc {last['mlm_accuracy']}")
    print(f"lower held-out masked-LM loss at equal CPU time: {best['tuning']} ({args.out})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
