"""`python -m berteval bench`: what berteval costs in time and memory, in one run on one machine.

Kept apart from the library's core, one module per section (`--sections`, all by default):
`encoders` times berteval's encoder path against transformers' pipeline and sentence-transformers on
the same model and inputs, fp32 and bf16, beside the machine's matmul peak; `ablation` times the SST-2
probe over one pooling and over four from a cold cache; `memory` measures fine-tune steps' peak RSS per
memory setting; `latency` times the demo's batch-1 passes and served calls; `pretrain` times berteval's
pre-training step against transformers' standard `BertForPreTraining` step on the same batches; `squad-step`
(named only, not in the default set: it reads the SQuAD train set) times the SQuAD lora-plus fine-tune step
padded to the window length, padded to the batch's longest, length-grouped, and in bf16, on the same windows,
and projects one epoch. `squad_dtypes` (--squad-dtypes, apart: ~9 minutes) scores the committed QA adapter in
fp32 and bf16.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from ..errors import BertevalError
from ..qa import DEFAULTS as QA_DEFAULTS

PEER_BATCH = 32  # the peers' batch size
SECTIONS = ("encoders", "ablation", "memory", "latency", "pretrain", "squad-step")
DEFAULT_SECTIONS = SECTIONS[:5]  # squad-step runs only when named: it windows the whole SQuAD train set


def add_arguments(ap) -> None:
    ap.add_argument("--sections", default=",".join(DEFAULT_SECTIONS),
                    help=f"which parts to run, comma-separated, of {', '.join(SECTIONS)} (default: %(default)s)")
    ap.add_argument("--model", default="default", help="'default' (embedded all-MiniLM-L6-v2), a local folder or a hub id")
    ap.add_argument("--data-dir", default=None,
                    help="folder holding sst2/ and squad/ (default $BERTEVAL_DATA; without either, a built-in sample)")
    ap.add_argument("--sentences", type=int, default=None, help="the first N SST-2 dev sentences (default: all 872)")
    ap.add_argument("--windows", type=int, default=64, help="SQuAD dev windows to time (default %(default)s; 0 skips)")
    ap.add_argument("--window-length", type=int, default=QA_DEFAULTS.max_length, help="tokens per QA window (default %(default)s)")
    ap.add_argument("--repeats", type=int, default=5, help="timed rounds; the median is reported (default %(default)s)")
    ap.add_argument("--batch-size", type=int, default=PEER_BATCH, help="the peers' batch size (default %(default)s)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own, one per core)")
    ap.add_argument("--device", default=None, help="auto, cpu, cuda, cuda:N or mps (or $BERTEVAL_DEVICE)")
    ap.add_argument("--bf16-budgets", default="", metavar="N,N,...",
                    help="also time bf16 (weights) sentences at these padded-token budgets per batch, e.g. "
                         "2048,8192,16384 (to tune berteval.features.MAX_TOKENS; default: its value only)")
    ap.add_argument("--json", default=None, metavar="OUT", help="also write the figures to this JSON file")
    ap.add_argument("--squad-dtypes", action="store_true",
                    help="instead: EM/F1 and wall time of the committed fine-tuned QA adapter on SQuAD dev, fp32 vs "
                         "bf16 (weights)")
    ap.add_argument("--squad-autocast", action="store_true",
                    help="with --squad-dtypes: also bf16 (autocast), the path bf16 took before bf16 weights")
    ap.add_argument("--limit-eval", type=int, default=None, help="with --squad-dtypes: the first N dev questions")
    ap.add_argument("--ablation-limit-train", type=int, default=None,
                    help="ablation: the first N SST-2 training sentences (default: all, as the runs in docs/performance.md)")
    ap.add_argument("--memory-steps", type=int, default=8, help="memory: fine-tune steps per setting (default %(default)s)")
    ap.add_argument("--memory-batch", type=int, default=32, help="memory: windows per step (default %(default)s)")
    ap.add_argument("--latency-calls", type=int, default=30, help="latency: timed calls per row (default %(default)s)")
    ap.add_argument("--squad-step-steps", type=int, default=6,
                    help="squad-step: timed fine-tune steps per setting, after one warm-up (default %(default)s)")
    ap.add_argument("--squad-step-sample", type=int, default=1600,
                    help="squad-step: training windows drawn (seeded) as the pool the timed batches come from "
                         "(default %(default)s: one chunk of the run's length-grouped sampler)")
    ap.add_argument("--squad-step-batch", type=int, default=None,
                    help="squad-step: windows per step (default: the lora-plus recipe's, 32)")
    ap.add_argument("--squad-step-large-batch", type=int, default=0, metavar="N",
                    help="squad-step: also length-grouped bf16 steps of N windows (default: none)")
    ap.add_argument("--squad-step-keep-activations", action="store_true",
                    help="squad-step: keep activations, as --no-activation-checkpointing (default: recompute them "
                         "and fix the mmap threshold, as span-QA fine-tunes run)")


def command(args) -> int:
    import sys

    from ..config import data_dir
    from . import ablation, latency, memory
    from .encoders import BF16_AUTOCAST, format_report, machine, run_bench
    from .squad_dtypes import SQUAD_PATHS, format_squad, squad_by_dtype

    log = lambda m: print(m, file=sys.stderr)  # noqa: E731
    from .. import devices

    devices.use(args.device)
    if args.squad_dtypes:
        folder = data_dir(args.data_dir)
        if folder is None:
            raise BertevalError("--squad-dtypes needs --data-dir (or BERTEVAL_DATA) with squad/dev-v1.1.json")
        paths = (*SQUAD_PATHS, *((BF16_AUTOCAST,) if args.squad_autocast else ()))
        source, rows = squad_by_dtype(folder, limit=args.limit_eval, paths=paths, log=log)
        print(format_squad(source, rows))
        if args.json:
            Path(args.json).write_text(json.dumps({"model": source, "rows": [asdict(r) for r in rows]}, indent=1))
        return 0
    sections = [x.strip() for x in args.sections.split(",") if x.strip()]
    if unknown := [x for x in sections if x not in SECTIONS]:
        raise BertevalError(f"--sections: unknown {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    try:
        budgets = [int(b) for b in args.bf16_budgets.split(",") if b.strip()]
    except ValueError as exc:
        raise BertevalError(f"--bf16-budgets takes comma-separated token counts such as 2048,8192, not "
                            f"{args.bf16_budgets!r}") from exc
    folder, out = data_dir(args.data_dir), {}
    if args.json:  # made now, so a bad path fails before the minutes of measuring, not after
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)

    def keep(section: str, figures) -> None:  # written after every section: a late failure keeps the rest
        out[section] = figures
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1))

    if "encoders" in sections:
        rep = run_bench(args.model, folder, args.sentences, args.windows, args.window_length,
                        args.repeats, args.batch_size, args.threads, budgets, log=log)
        print(format_report(rep), flush=True)
        keep("encoders", rep.to_json())
    else:
        print(f"model {args.model}; {machine()}", flush=True)
    if "ablation" in sections:
        if folder is None:
            print("\nablation: left out (it runs the SST-2 probe: give --data-dir or BERTEVAL_DATA)")
        else:
            rows = ablation.measure(args.model, folder, limit_train=args.ablation_limit_train, log=log)
            print("\n" + ablation.format_ablation(rows, args.ablation_limit_train), flush=True)
            keep("ablation", [asdict(r) for r in rows])
    if "memory" in sections:
        rows = memory.run_settings(args.model, steps=args.memory_steps, batch=args.memory_batch,
                                   length=min(args.window_length, QA_DEFAULTS.max_length), log=log)
        print("\n" + memory.format_memory(rows), flush=True)
        keep("memory", [asdict(r) for r in rows])
    if "pretrain" in sections:
        from . import pretrain

        res = pretrain.measure(args.threads, log=log)
        print("\n" + pretrain.format_pretrain(res), flush=True)
        keep("pretrain", res)
    if "latency" in sections:
        rows, notes = latency.measure(args.model, n=args.latency_calls, log=log)
        print("\n" + latency.format_latency(rows, notes), flush=True)
        keep("latency", {"rows": [asdict(r) for r in rows], "notes": notes})
    if "squad-step" in sections:  # last: it fixes glibc's mmap threshold for the rest of the process
        if folder is None:
            print("\nsquad-step: left out (it trains on the SQuAD train set: give --data-dir or BERTEVAL_DATA)")
        else:
            from . import squad_step

            rep = squad_step.measure(args.model, folder, max_length=args.window_length, steps=args.squad_step_steps,
                                     pool=args.squad_step_sample, batch=args.squad_step_batch,
                                     large_batch=args.squad_step_large_batch,
                                     checkpointing=not args.squad_step_keep_activations, threads=args.threads, log=log)
            print("\n" + squad_step.format_squad_step(rep), flush=True)
            keep("squad-step", rep.to_json())
    return 0
