"""`python -m berteval`: run ablations, list what exists, validate and summarise records.

Every choice list comes from a registry (tasks, poolings, regimes), so the CLI never
needs editing when one grows. User mistakes exit 2 with a one-line message that says
what to do; a traceback means a bug. argparse only: the light verbs (`ls`, `validate`,
`summary`, `disagree`, `export`) import neither torch nor transformers; `run` and `bench`
import them when they run.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

from . import __version__
from .config import RESULTS_ENV
from .errors import BertevalError
from .qa import DEFAULTS as QA

EXAMPLES = """examples:
  python -m berteval run --task sst2 --model default --pooling cls,pooler,mean,max --seeds 0,1,2 \\
      --data-dir ../shared/data --out leaderboard/results
  python -m berteval run --task sst2 --pooling cls,mean --layers -1,-2,3 --data-dir ../shared/data
  python -m berteval run --task sst2 --limit-train 2000 --seeds 0 --data-dir ../shared/data --out /tmp/r
  python -m berteval run --task sst2 --pooling cls,mean --train-sizes 32,512,full --seeds 0,1,2,3,4 \\
      --data-dir ../shared/data
  python -m berteval run --task squad --model default --regime finetune --seeds 0 --data-dir ../shared/data \\
      --out leaderboard/results
  python -m berteval run --task squad --regime finetune-lora-plus --train-set full --dtype bf16 --seeds 0 \\
      --epochs 1 --no-activation-checkpointing --data-dir ../shared/data --out leaderboard/results   # the demo QA head
  python -m berteval run --task mrpc --pooling cls,pooler,mean,bi-mean --seeds 0,1,2 --data-dir ../shared/data
  python -m berteval derive default+nsp-pooler --data-dir ../shared/data
  python -m berteval run --task nsp --model default+nsp-pooler --regime pretrained --data-dir ../shared/data
  python -m berteval ls
  python -m berteval validate leaderboard/results/*.jsonl
  python -m berteval summary leaderboard/results/sst2.jsonl --markdown
  python -m berteval disagree --task sst2 --model default --a mean --b cls --seed 0 --data-dir ../shared/data
  python -m berteval export model-index --model default --out model-index.yaml
  python -m berteval bench --data-dir ../shared/data --json /tmp/bench.json
"""


def _run_arguments(r: argparse.ArgumentParser) -> None:
    """The options of `run` (the grid, the data, the heads' training, SQuAD's windows, precision and device)."""
    from .pooling import POOLINGS, default_names
    from .regimes import REGIMES
    from .tasks import TASKS

    r.add_argument("--task", required=True, help=f"one of: {', '.join(TASKS)}")
    r.add_argument("--model", default="default",
                   help="'default' (embedded all-MiniLM-L6-v2), a local folder, or a hub id such as bert-base-uncased")
    r.add_argument("--revision", default=None, help="hub revision (branch, tag or commit) for a hub id")
    r.add_argument("--pooling", default=None,
                   help=f"comma-separated, from: {', '.join(POOLINGS)} (default: the regime's grid; the probe's is "
                        f"{','.join(default_names())})")
    r.add_argument("--layers", default=None,
                   help="comma-separated hidden-state indices, -1 = last (default), 0 = embeddings, e.g. -1,-2,3")
    r.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    r.add_argument("--regime", default="probe", help=f"one of: {', '.join(REGIMES)}")
    r.add_argument("--data-dir", default=None,
                   help="local data folder (holds sst2/, squad/); default $BERTEVAL_DATA, else the hub")
    r.add_argument("--out", default=None,
                   help=f"results folder for <task>.jsonl records (default ${RESULTS_ENV}, else the committed "
                        f"leaderboard/results beside the package, wherever the command runs)")
    r.add_argument("--max-length", type=int, default=None,
                   help=f"tokens per input or QA window (default: 128 for sentences, {QA.max_length} for SQuAD windows)")
    r.add_argument("--doc-stride", type=int, default=None,
                   help=f"SQuAD: tokens shared by neighbouring windows (default {QA.doc_stride})")
    r.add_argument("--n-best", type=int, default=None, help=f"SQuAD: answers kept per question (default {QA.n_best})")
    r.add_argument("--max-answer-length", type=int, default=None,
                   help=f"SQuAD: longest answer in tokens (default {QA.max_answer_length})")
    r.add_argument("--epochs", type=float, default=None, help="trained heads: epochs (default per regime)")
    r.add_argument("--lr", type=float, default=None, help="trained heads: peak learning rate")
    r.add_argument("--batch-size", type=int, default=None, help="trained heads: batch size")
    r.add_argument("--folds", type=int, default=None,
                   help="SQuAD fine-tunes: k-fold cross-validation by dev article (train + the other folds' dev "
                        "articles -> each fold's held-out articles), then a head trained on every question")
    r.add_argument("--train-set", choices=("subset", "full"), default=None,
                   help="SQuAD: train on the 17 official train articles (subset, default: the committed records) or "
                        "on all 87,599 questions of squad/train-v1.1-reconstructed.json (full; its offsets by the "
                        "rule of berteval.tasks.squad_offsets)")
    r.add_argument("--no-activation-checkpointing", dest="activation_checkpointing", action="store_false",
                   help="SQuAD fine-tunes: keep every layer's activations for the backward pass instead of "
                        "recomputing them, and leave glibc's heap growth at its default (a faster step, several GB more "
                        "memory; the same weights either way)")
    r.add_argument("--limit-eval", type=int, default=None,
                   help="score the first N eval examples only (a quick look, never a leaderboard row)")
    r.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "auto"],
                   help="encoder compute dtype (default fp32); auto: bf16 where the CPU has AVX512-BF16 or AMX (or the "
                        "GPU has bf16), else fp32; records and run ids name the dtype that ran")
    r.add_argument("--device", default=None,
                   help="auto (default: CUDA when present, else MPS, else the CPU), cpu, cuda, cuda:N or mps "
                        "(or $BERTEVAL_DEVICE); recorded, and named in the run id of bf16 and trained cells off the CPU")
    r.add_argument("--limit-train", type=int, default=None, help="use a fixed subset of N training examples")
    r.add_argument("--train-sizes", default=None,
                   help="learning curve: comma-separated training sizes, each seed drawing its own nested subset "
                        "of the train set, and 'full', e.g. 32,128,512,full (probe and fine-tune)")
    r.add_argument("--no-progress", action="store_true", help="hide progress bars")
    r.add_argument("--plan", action="store_true",
                   help="list the command's cells, each present in the results or to run, and stop: loads no "
                        "model, writes nothing (exit 0 when every cell is present, 1 when some would run)")


def _parser() -> argparse.ArgumentParser:
    from .tasks import TASKS

    ap = argparse.ArgumentParser(
        prog="python -m berteval",
        description=f"Score BERT heads and pooling choices on {', '.join(t.display_name for t in TASKS.values())}; "
                    f"write typed result records.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--version", action="version", version=f"berteval {__version__}")
    sub = ap.add_subparsers(dest="verb", required=True)

    _run_arguments(sub.add_parser("run", help="run a (pooling x layer x seed) grid; skips records that exist",
                                  epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter))
    sub.add_parser("ls", help="list tasks, poolings and regimes")

    v = sub.add_parser("validate", help="check record files; report bad lines by number; exit 1 if any")
    v.add_argument("files", nargs="+")

    s = sub.add_parser("summary", help="mean ± std and 95%% interval across seeds, per model x task x pooling x layer")
    s.add_argument("files", nargs="+")
    s.add_argument("--markdown", action="store_true", help="print a Markdown table")

    from .disagree import add_arguments as disagree_arguments  # light: records and predictions only
    from .export import add_arguments as export_arguments  # light: records only

    disagree_arguments(sub.add_parser("disagree", help="the examples two heads of one run disagree on (the McNemar "
                                                       "counts, then each example with its text)"))
    export_arguments(sub.add_parser("export", help="results for a Hugging Face model card (model-index YAML)"))

    from .bench import add_arguments as bench_arguments  # light: the bench imports torch when it runs
    from .derive import add_arguments as derive_arguments  # light too: a recipe imports torch when it runs

    derive_arguments(sub.add_parser("derive", help="make a derived encoder (default+nsp-pooler, default+mlm-nsp, "
                                                   "default+mlm-nsp-wiki, default+mlm-wiki, default+random): seeded, "
                                                   "resumable, with a provenance record"))

    from .pretrain.command import add_arguments as pretrain_arguments  # light: torch loads when it runs

    pretrain_arguments(sub.add_parser("pretrain", help="pre-train a BERT twin from scratch on Wikipedia "
                                                       "(wiki-bert-mini: MLM + NSP; wiki-bert-mini-nonsp: MLM only)"))

    from .suites import add_arguments as suite_arguments  # light: a registry of run commands

    suite_arguments(sub.add_parser("suite", help="run a named set of `run` commands on one model (every head of a "
                                                 "twin, of a derived encoder, ...); resumable, --plan lists them"))
    bench_arguments(sub.add_parser("bench", help="sentences/s and QA windows/s of berteval vs transformers' pipeline "
                                                 "and sentence-transformers, on the same model and data"))
    return ap


def _cmd_run(args) -> int:
    from . import pooling, runs
    from .config import data_dir
    from .regimes.grid import parse_train_sizes
    from .store import Store
    from .tasks import get

    from . import devices, precision

    task = get(args.task)
    # Resolved once: every load, pass and fit of this run uses it (a device that is not here is refused now).
    (devices.requested if args.plan else devices.use)(args.device)
    # --plan sets no device (it loads nothing); for --dtype auto it still asks which one a run would get.
    dtype = precision.resolve(args.dtype, devices.resolve(args.device) if args.plan and args.dtype == "auto" else None)
    if dtype != args.dtype:
        print(f"note: --dtype {args.dtype} runs {dtype} here", file=sys.stderr)
    elif not args.plan and (note := precision.emulated_bf16_note(dtype)):
        print(f"note: {note}", file=sys.stderr)
    spec = runs.RunSpec(
        task=task,
        model=args.model,
        revision=args.revision,
        poolings=pooling.parse(args.pooling) if args.pooling is not None else None,
        layers=args.layers,
        seeds=runs.parse_seeds(args.seeds),
        regime=args.regime,
        data_dir=data_dir(args.data_dir),
        out=Path(args.out) if args.out else None,
        max_length=args.max_length,
        dtype=dtype,
        limit_train=args.limit_train,
        train_set=args.train_set,
        train_sizes=parse_train_sizes(args.train_sizes),
        limit_eval=args.limit_eval,
        progress=not args.no_progress,
        doc_stride=args.doc_stride,
        n_best=args.n_best,
        max_answer_length=args.max_answer_length,
        epochs=args.epochs,
        lr=args.lr,
        batch_size=args.batch_size,
        folds=args.folds,
        activation_checkpointing=args.activation_checkpointing,
        plan=args.plan,
    )
    if spec.data_dir is None:
        print(f"no --data-dir or BERTEVAL_DATA: reading {task.hub_source} from the hub", file=sys.stderr)
    started = time.perf_counter()
    report = runs.run(spec)
    for note in report.notes:
        print(f"note: {note}", file=sys.stderr)
    if spec.plan:
        return _print_plan(task.name, report, Store(spec.out).records_path(task.name))
    for rec in report.written:
        fold = rec.config.get("kfold", {}).get("fold")
        print(f"wrote {_cell_label(rec.task, rec.pooling, rec.layer, rec.config.get('train_size'), rec.seed, fold)}: "
              f"{rec.main_metric} {rec.main_value:.4f} ({rec.wall_s:.1f}s)")
    from .store import is_writer, process_count

    if not is_writer():  # under accelerate launch: this process trained and scored with the others; rank 0 writes
        print(f"process {os.environ.get('RANK')} of {process_count()}: done; rank 0 writes the records")
        return 0
    # The encoder pass a regime makes once for all its cells, where it makes one (a fine-tune encodes as it trains).
    encoded = (f"; encoded {report.encoded_examples:,} {report.encoded_unit} in {report.encode_wall_s:.1f}s"
               if report.encoded_examples else "")
    print(f"{len(report.written)} records written, {len(report.skipped)} already present "
          f"-> {Store(spec.out).records_path(task.name)} in {time.perf_counter() - started:.1f}s{encoded}")
    return 0


def _cell_label(task: str, pooling: str, layer: int, train_size: int | None, seed: int,
                fold: int | None = None) -> str:
    """How a cell is named in the run command's output, e.g. 'sst2 mean@-1 train 512 seed 0' or, for a
    k-fold run, 'squad span@-1 seed 0 fold 2' (fold 0: the head trained on every question)."""
    size = f" train {train_size:,}" if train_size is not None else ""
    from .regimes.kfold import ALL

    part = "" if fold is None else (" all questions" if fold == ALL else f" fold {fold}")
    return f"{task} {pooling}@{layer}{size} seed {seed}{part}"


def _print_plan(task: str, report, records_path) -> int:
    """--plan: one line per cell, then the counts; exit 1 when a cell would run (scripts can test it)."""
    for cell, rid, present in report.planned:
        label = _cell_label(task, cell.pooling, cell.layer, cell.train_size, cell.seed, getattr(cell, "fold", None))
        print(f"{'present' if present else 'to run '}  {rid}  {label}")
    missing = sum(not present for _, _, present in report.planned)
    print(f"{len(report.planned) - missing} of {len(report.planned)} cells present in {records_path}; "
          f"{missing} would run")
    return 1 if missing else 0


def _cmd_ls(args) -> int:
    from .pooling import POOLINGS
    from .regimes import REGIMES, supported
    from .tasks import TASKS

    print("tasks:")
    for t in TASKS.values():
        print(f"  {t.name} (v{t.version}, {t.kind}): {t.description}")
        print(f"      metrics {', '.join(t.metrics)} ({t.main_metric} first, "
              f"{'higher' if t.greater_is_better else 'lower'} is better); regimes {', '.join(supported(t))}; "
              f"hub {t.hub_source}; local {t.local_layout}")
    print("poolings:")
    for p in POOLINGS.values():
        width = "hidden size" if p.width_factor == 1 else f"{p.width_factor} x hidden size"
        print(f"  {p.name}: {p.description} (width {width})")
    print("regimes:")
    for r in REGIMES.values():
        print(f"  {r.name}: {r.description} (runs {', '.join(r.kinds)})")
    return 0


def _cmd_validate(args) -> int:
    from .records import read_records, record_files

    files = record_files(args.files)  # a folder: its record files, as the leaderboard reads it
    recs, problems = read_records(files)
    for p in problems:
        print(p, file=sys.stderr)
    print(f"{len(recs)} valid records, {len(problems)} bad lines in {len(files)} files")
    return 1 if problems else 0


def _cmd_summary(args) -> int:
    from .records import read_records, record_files
    from .stats import summarise

    missing = [f for f in args.files if not Path(f).exists()]
    if missing:  # a typo must not pass for "no results": say so and exit non-zero
        raise BertevalError(f"no such file: {', '.join(missing)}; summary reads record files (.jsonl) or folders of "
                            f"them, e.g. leaderboard/results/sst2.jsonl")
    files = record_files(args.files)  # a folder: its record files, as validate and the leaderboard read it
    recs, problems = read_records(files)
    for p in problems:
        print(f"skipped {p}", file=sys.stderr)
    if not recs:
        raise BertevalError(f"no valid records in {', '.join(map(str, files)) or ', '.join(args.files)}"
                            f"{' (bad lines above)' if problems else ''}; `validate` names what is wrong with a file")
    groups = defaultdict(list)
    for r in recs:
        groups[(r.model, r.task, r.regime, r.pooling, r.layer, r.n_train, r.dtype, r.main_metric)].append(r)
    rows = []
    from .pooling import POOLINGS

    order = {name: i for i, name in enumerate(POOLINGS)}
    # Registry order for poolings, then layers bottom-up with the last layer (-1) last.
    sort_key = lambda kv: (kv[0][:3], order.get(kv[0][3], len(order)), kv[0][3],  # noqa: E731
                           kv[0][4] if kv[0][4] >= 0 else float("inf"), kv[0][5:])
    for (model, task, regime, pool, layer, n_train, dtype, metric), rs in sorted(groups.items(), key=sort_key):
        s = summarise(r.main_value for r in rs)
        rows.append((model, task, regime, pool, layer, metric, s, n_train, rs[0].n_eval, dtype))
    if args.markdown:
        print("| model | task | regime | pooling | layer | metric | mean ± std | 95% CI | seeds | n train | n eval |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
    for model, task, regime, pool, layer, metric, s, n_train, n_eval, dtype in rows:
        ci = f"[{s.ci95_low:.4f}, {s.ci95_high:.4f}]" if s.n > 1 else "n/a"
        if args.markdown:
            print(f"| {model} | {task} | {regime} | {pool} | {layer} | {metric} | {s.mean:.4f} ± {s.std:.4f} "
                  f"| {ci} | {s.n} | {n_train:,} | {n_eval:,} |")
        else:
            print(f"{model} {task} {regime} {pool}@{layer} {metric}: {s.mean:.4f} ± {s.std:.4f} "
                  f"95% CI {ci} (n={s.n}, train {n_train}, eval {n_eval}, {dtype})")
    return 0


def _cmd_derive(args) -> int:
    from .derive import command

    return command(args)


def _cmd_pretrain(args) -> int:
    from .pretrain.command import command

    return command(args)


def _cmd_disagree(args) -> int:
    from .disagree import command

    return command(args)


def _cmd_export(args) -> int:
    from .export import command

    return command(args)


def _cmd_bench(args) -> int:
    from .bench import command

    return command(args)


def _cmd_suite(args) -> int:
    """Each step of the suite through `main(["run", ...])`, the one run path; sys.argv is the step's own command
    while it runs, so each record's `config.command` is the `run` line that reproduces it."""
    import shlex

    from . import models, suites

    suite = suites.get(args.suite)
    steps = suites.select(suite.steps(), args.only)
    layers = models.identify(args.model).num_hidden_states if any(
        suites.ALL_LAYERS in s.options for s in steps) else 0
    common = [*(["--data-dir", args.data_dir] if args.data_dir else []), *(["--out", args.out] if args.out else []),
              "--device", args.device, *(["--no-progress"] if args.no_progress else []),
              *(["--plan"] if args.plan else [])]
    to_run, refused, argv0 = 0, 0, sys.argv[0] if sys.argv else "berteval"
    for k, step in enumerate(steps, 1):
        line = suites.argv(step, args.model, layers, common)
        print(f"== {suite.name} step {k}/{len(steps)} ({step.group}): python -m berteval {shlex.join(line)}",
              flush=True)
        saved, sys.argv = sys.argv, [argv0, *line]
        try:
            rc = main(line)
        finally:
            sys.argv = saved
        if rc == 2 and step.only_where:
            refused += 1
            print(f"   (this step runs only where {step.only_where}; the suite goes on)", flush=True)
        elif args.plan and rc in (0, 1):
            to_run += rc
        elif rc != 0:
            print(f"suite {suite.name} stopped at step {k} of {len(steps)}; what it wrote is kept, and the same "
                  f"command resumes it", file=sys.stderr)
            return rc
    done = f"{len(steps) - refused} steps" + (f" ({refused} refused where the model cannot take them)" if refused else "")
    if args.plan:
        print(f"suite {suite.name} on {args.model}: {done}; {to_run} with cells to run")
        return 1 if to_run else 0
    print(f"suite {suite.name} on {args.model}: {done} done")
    return 0


COMMANDS = {"run": _cmd_run, "suite": _cmd_suite, "ls": _cmd_ls, "validate": _cmd_validate, "summary": _cmd_summary, "bench": _cmd_bench,
            "derive": _cmd_derive, "pretrain": _cmd_pretrain, "disagree": _cmd_disagree, "export": _cmd_export}


def _glue_negative_lists(argv: list[str]) -> list[str]:
    """argparse reads `--layers -1,-2,3` as an unknown option; join such values to their flag."""
    out: list[str] = []
    for arg in argv:
        if out and out[-1] in ("--layers", "--seeds") and re.fullmatch(r"-\d+(,-?\d+)*", arg):
            out[-1] = f"{out[-1]}={arg}"
        else:
            out.append(arg)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = _glue_negative_lists(list(sys.argv[1:] if argv is None else argv))
    args = _parser().parse_args(argv)
    # Quiet the libraries' own chatter: berteval reports what matters (e.g. missing heads) itself.
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    try:
        return COMMANDS[args.verb](args)
    except BertevalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the environment (a full disk, a read-only or missing file): one line naming it
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: records written so far are kept; rerun the same command to resume", file=sys.stderr)
        return 130
