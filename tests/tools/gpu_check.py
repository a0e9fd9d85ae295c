"""The prepared GPU check: one script, torch and transformers only, ten minutes end to end, every figure to one folder.

A lent GPU machine here has torch and transformers but no `datasets` or Gradio, reaches no hub, and takes at most
64 MiB of files beside the working tree. So the model and data travel prepared (make them here, then carry them):

    python tests/tools/gpu_check.py --prepare .gpu            # here: a bf16 copy of the default model (~45 MB),
                                                              # 20,000 pre-training sequences of the twins (~9 MB)
    python tests/tools/gpu_check.py --carried .gpu --out $OUT # there (or here with --device cpu, to try it)

What it measures, on the device it is given (`--device`, default cuda) against the same machine's CPU:
1. parity: berteval's pooled features (cls, pooler, mean; `berteval.features.encode`) and QA window logits
   (`berteval.qa.inference.window_logits`, the default model under a random span head seeded 0) on the device
   against the CPU, fp32: the largest absolute difference and the lowest cosine;
2. throughput: sentences per second of berteval's encoder path against transformers'
   `pipeline("feature-extraction", device=0)` on the same sentences, fp32 and bf16, one run;
3. pre-training: the twins' step (`berteval.pretrain.loop`) on the carried sequences for `--pretrain-steps`,
   tokens per second and the loss curve; with `--twin-seconds S`, both twins trained S seconds each on the
   carried sequences (cycled: 120,000 sequences = 15 M tokens fit the 64 MiB), saved under --out as
   standard checkpoint folders (tokenizer included) to bring back.
Writes `gpu_check.json` (and prints it). Each part is skipped, with the reason in the file, when what it needs
is missing; the whole run stops at `--budget-s` (default 540 s).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

SENTENCES = [f"The {a} film was {b}, and its {c} felt {d}." for a in ("new", "old", "long", "short", "quiet")
             for b in ("good", "dull", "moving", "slow") for c in ("plot", "score", "cast") for d in ("thin", "rich")]


def prepare(folder: Path, sequences: int, with_model: bool = True) -> None:
    """Here, where the default model and the prepared pre-training examples are: what the GPU machine needs."""
    import numpy as np
    import torch

    from berteval import models
    from berteval.pretrain import examples

    folder.mkdir(parents=True, exist_ok=True)
    loaded = models.load("default")
    from transformers import AutoModel

    if with_model:
        model = AutoModel.from_pretrained(str(models.default_model_path())).to(torch.bfloat16)
        model.save_pretrained(str(folder / "default-bf16"), max_shard_size="9MB")
        loaded.tokenizer.save_pretrained(str(folder / "default-bf16"))
    from berteval import config

    caches = sorted((config.cache_dir() / "pretrain").glob("*/manifest.json"))
    if caches:
        src = caches[-1].parent
        seqs = examples._load(src, "train128").take(np.arange(sequences))
        with open(folder / "pretrain128.npz", "wb") as fh:
            np.savez(fh, **{k: getattr(seqs, k) for k in examples.ARRAYS})
        import shutil

        shutil.copytree(src / "tokenizer", folder / "tokenizer", dirs_exist_ok=True)
        print(f"prepared {folder}: default-bf16/ and {sequences:,} sequences from {src.name}")
    else:
        print(f"prepared {folder}: default-bf16/ (no prepared pre-training examples here: part 3 will be skipped)")


def _parity(model_dir: Path, device, log) -> dict:
    import numpy as np
    import torch

    from berteval import devices, features, models
    from berteval.qa import inference, windows

    out = {}
    for where in ("cpu", str(device)):
        devices.use(where)
        models.load.cache_clear()
        m = models.load(str(model_dir))
        m.encoder.float()
        enc = features.encode(m, SENTENCES, data_sha256="gpu-check", poolings=["cls", "pooler", "mean"],
                              progress=False, use_cache=False)
        from transformers import AutoModelForQuestionAnswering

        torch.manual_seed(0)
        qa = AutoModelForQuestionAnswering.from_pretrained(str(model_dir)).float().eval().to(devices.current())
        w = windows.make_windows(m.tokenizer, ["What was the film?"] * 4, SENTENCES[:4], max_length=128,
                                 doc_stride=32)
        s, e = inference.window_logits(qa, m.tokenizer, w)
        out[where] = (enc.vectors, s, e)
    cpu, dev = out["cpu"], out[str(device)]
    res = {}
    for key in cpu[0]:
        a, b = cpu[0][key], dev[0][key]
        cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        res[f"{key[0]}"] = {"max_abs_diff": float(np.abs(a - b).max()), "min_cosine": float(cos.min())}
    res["qa_logits_max_abs_diff"] = float(max(np.abs(x - y).max() for x, y in zip(cpu[1] + cpu[2], dev[1] + dev[2])))
    log(f"parity: {res}")
    return res


def _throughput(model_dir: Path, device, log, repeats: int = 3) -> dict:
    import torch
    from transformers import pipeline

    from berteval import devices, features, models

    devices.use(str(device))
    models.load.cache_clear()
    m = models.load(str(model_dir))
    m.encoder.float()
    texts = SENTENCES * 20
    res = {}
    for dtype in ("fp32", "bf16"):
        features.encode(m, texts[:64], data_sha256="warm", poolings=["mean"], dtype=dtype, progress=False,
                        use_cache=False)
        t0 = time.perf_counter()
        for _ in range(repeats):
            features.encode(m, texts, data_sha256="t", poolings=["mean"], dtype=dtype, progress=False, use_cache=False)
        res[f"berteval {dtype}"] = round(repeats * len(texts) / (time.perf_counter() - t0), 1)
    pipe = pipeline("feature-extraction", model=str(model_dir), device=0 if device.type == "cuda" else -1,
                    dtype=torch.float32)
    pipe(texts[:64], batch_size=32)
    t0 = time.perf_counter()
    for _ in range(repeats):
        pipe(texts, batch_size=32)
    res["transformers pipeline fp32 (batch 32)"] = round(repeats * len(texts) / (time.perf_counter() - t0), 1)
    log(f"throughput (sentences/s): {res}")
    return res


def _twins(path: Path, tokenizer_dir: Path, device, seconds: float, out: Path, log) -> dict:
    """Both twins on the carried sequences, the same examples in the same order from the same initialisation,
    `seconds` each (batch 256 x 128 tokens, the carried set cycled), saved as standard checkpoint folders."""
    import numpy as np
    import torch

    from berteval import devices
    from berteval.pretrain import examples, loop

    devices.use(str(device))
    with np.load(path) as z:
        seqs = examples.Sequences(*(z[k] for k in examples.ARRAYS))
    hyper = {"hidden_size": 256, "layers": 4, "heads": 4, "intermediate_size": 1024, "lr": 1e-3, "warmup_steps": 500,
             "beta1": 0.9, "beta2": 0.98, "weight_decay": 0.01, "max_grad_norm": 1.0}
    batch, res = 256, {}
    for name, nsp in (("wiki-bert-mini", True), ("wiki-bert-mini-nonsp", False)):
        model = loop.build_model(hyper, 8192, 0).to(device)
        total = 100_000  # the schedule's length; the run stops at `seconds`
        params, opt, sched = loop._optimiser(model, hyper, total, nsp)
        obj = loop.Objective(model, nsp)
        torch.manual_seed(0)
        order = np.random.default_rng(0).permutation(len(seqs))
        curve, tokens, step, t0 = [], 0, 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            idx = order[(np.arange(batch) + step * batch) % len(order)]
            b = loop.batch_tensors(seqs, idx, device)
            with loop._autocast(device, "bf16"):
                o = obj(**b)
            o["loss"].backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            tokens += int(b["attention_mask"].sum())
            step += 1
            if step % 200 == 0:
                curve.append([step, round(float(o["mlm_loss"]), 4), round(float(o["nsp_loss"]), 4)])
        folder = out / name
        model.cpu().save_pretrained(str(folder), max_shard_size="9MB")
        if tokenizer_dir.is_dir():
            from transformers import AutoTokenizer

            AutoTokenizer.from_pretrained(str(tokenizer_dir)).save_pretrained(str(folder))
        res[name] = {"steps": step, "tokens": tokens, "tokens_per_s": round(tokens / (time.perf_counter() - t0)),
                     "curve_mlm_nsp": curve, "saved": str(folder)}
        log(f"{name}: {step} steps, {tokens:,} tokens")
    return res


def _pretrain(path: Path, device, steps: int, log) -> dict:
    import numpy as np
    import torch

    from berteval import devices
    from berteval.pretrain import examples, loop

    devices.use(str(device))
    with np.load(path) as z:
        seqs = examples.Sequences(*(z[k] for k in examples.ARRAYS))
    hyper = {"hidden_size": 256, "layers": 4, "heads": 4, "intermediate_size": 1024, "lr": 2e-3, "warmup_steps": 100,
             "beta1": 0.9, "beta2": 0.98, "weight_decay": 0.01, "max_grad_norm": 1.0}
    model = loop.build_model(hyper, 8192, 0).to(device)
    params, opt, sched = loop._optimiser(model, hyper, steps, True)
    obj = loop.Objective(model, True)
    batch, losses, tokens = 128, [], 0
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    for s in range(steps):
        b = loop.batch_tensors(seqs, rng.integers(0, len(seqs), batch), device)
        with loop._autocast(device, "bf16"):
            out = obj(**b)
        out["loss"].backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        tokens += int(b["attention_mask"].sum())
        if s % 50 == 0:
            losses.append([s, round(float(out["mlm_loss"]), 4)])
    if device.type == "cuda":
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    res = {"steps": steps, "batch": batch, "tokens_per_s": round(tokens / wall), "wall_s": round(wall, 1),
           "mlm_loss_curve": losses}
    log(f"pre-training step: {res['tokens_per_s']:,} tokens/s over {steps} steps")
    return res


def main(argv: list[str] | None = None) -> int:
    # the whole docstring, as written: how to prepare and carry the files, and what each part measures
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prepare", type=Path, help="make the carried folder here and stop")
    ap.add_argument("--sequences", type=int, default=20_000, help="--prepare: pre-training sequences to carry")
    ap.add_argument("--without-model", action="store_true",
                    help="--prepare: leave the model copy out (the twins' run: 120,000 sequences are 41 MB alone; "
                         "with the 45 MB model they pass the 64 MiB a GPU machine takes)")
    ap.add_argument("--carried", type=Path, default=REPO / ".gpu", help="the folder --prepare made")
    ap.add_argument("--out", type=Path, default=Path("gpu_check_out"), help="where gpu_check.json goes")
    ap.add_argument("--device", default="cuda", help="the device to check against this machine's CPU")
    ap.add_argument("--pretrain-steps", type=int, default=300)
    ap.add_argument("--budget-s", type=float, default=540)
    ap.add_argument("--twin-seconds", type=float, default=0,
                    help="also pre-train both twins this many seconds each on the carried sequences (e.g. 150 on "
                         "an H200) and save them under --out (0: skip)")
    args = ap.parse_args(argv)
    if args.prepare:
        prepare(args.prepare, args.sequences, not args.without_model)
        return 0
    import torch

    from berteval import devices

    t_start = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"torch": torch.__version__, "device": args.device}
    log = lambda m: print(m, flush=True)  # noqa: E731

    def save():
        (args.out / "gpu_check.json").write_text(json.dumps(report, indent=1))

    try:
        device = devices.resolve(args.device)
    except Exception as exc:  # noqa: BLE001
        report["error"] = str(exc)
        save()
        print(report["error"], file=sys.stderr)
        return 2
    report["device_name"] = devices.describe(device)
    model_dir = args.carried / "default-bf16"
    parts = [("parity", lambda: _parity(model_dir, device, log), model_dir.is_dir()),
             ("throughput", lambda: _throughput(model_dir, device, log), model_dir.is_dir()),
             ("pretrain", lambda: _pretrain(args.carried / "pretrain128.npz", device, args.pretrain_steps, log),
              (args.carried / "pretrain128.npz").is_file()),
             ("twins", lambda: _twins(args.carried / "pretrain128.npz", args.carried / "tokenizer", device,
                                      args.twin_seconds, args.out, log),
              args.twin_seconds > 0 and (args.carried / "pretrain128.npz").is_file())]
    for name, run, ready in parts:
        if time.perf_counter() - t_start > args.budget_s:
            report[name] = {"skipped": f"past the {args.budget_s:.0f} s budget"}
        elif not ready:
            report[name] = {"skipped": f"{args.carried} lacks what it needs: run --prepare here first"}
        else:
            try:
                report[name] = run()
            except Exception as exc:  # noqa: BLE001: one part failing keeps the others' figures
                report[name] = {"failed": f"{type(exc).__name__}: {exc}"}
        save()
    report["wall_s"] = round(time.perf_counter() - t_start, 1)
    save()
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
