"""Named sets of runs: every head a kind of model is scored on, as one resumable command.

A model pre-trained or derived here is read by about twenty `berteval run` commands (frozen probes of every
task, the NSP head, every layer, two fine-tuning protocols, SQuAD); across sessions a person would retype them
and miss some. `python -m berteval suite NAME --model M` runs a suite's commands in order, each through the one
`run` path (so each skips the cells its records already hold: the same command again resumes a suite a session
ended inside), and `--plan` lists what each would still run, loading nothing. `--only` keeps the steps of some
groups or tasks (`--only probes`, `--only sst2,mrpc`).

The suites (`SUITES`, the one registry of them) follow the issues that asked for them: `twin-heads`, every head
of a BERT pre-trained here (issue 41, items 5 and 6); `seed-spread`, what a second pre-training seed is compared
on (item 4: the frozen probes and the MRPC and STS-B fine-tunes); `derived-heads`, every head of an encoder
continued from all-MiniLM-L6-v2 (issue 43); `small-bert-peer`, the small-BERT protocol on all-MiniLM-L6-v2 where
the two fine-tuning protocols meet (item 5). Which options each step passes is written once, in `GROUPS`.
Light: no torch; the steps import what they need when they run.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import BertevalError

POOLED = "cls,pooler,mean,max"  # the frozen readings of one input
PAIRED = POOLED + ",bi-mean"  # ... and, on a sentence pair, the two sentences encoded apart
TRAINED = "cls,pooler,mean"  # what a fine-tune reads (max is not trained by these protocols)
SEEDS = "0,1,2"
ALL_LAYERS = "all"  # expanded to every hidden state of the model: 0 = the embeddings ... L = the last layer


@dataclass(frozen=True)
class Step:
    group: str  # what `--only` names: probes, nsp-head, layers, finetune, small-bert, squad
    task: str
    options: tuple[str, ...]  # `run` options after --task and --model
    # A step that only some models can take (the NSP head scored as trained: a control's never was): its
    # refusal is reported and the suite goes on; any other step's failure stops the suite.
    only_where: str = ""


def _steps(group: str, tasks: tuple[str, ...], *options: str, only_where: str = "") -> tuple[Step, ...]:
    return tuple(Step(group, task, tuple(options), only_where) for task in tasks)


GROUPS: dict[str, tuple[Step, ...]] = {
    "nsp-head": _steps("nsp-head", ("nsp",), "--regime", "pretrained",
                       only_where="the model's NSP head was trained (a control's never was: refused there)"),
    "probes": (*_steps("probes", ("sst2", "nsp"), "--pooling", POOLED, "--seeds", SEEDS),
               *_steps("probes", ("mrpc", "rte", "stsb"), "--pooling", PAIRED, "--seeds", SEEDS),
               *_steps("probes", ("qnli",), "--pooling", PAIRED, "--seeds", "0"),  # 5-fold over dev: its own spread
               *_steps("probes", ("squad",), "--seeds", "0")),  # the per-token span probe on the frozen encoder
    "layers": _steps("layers", ("sst2",), "--pooling", "cls,mean", "--layers", ALL_LAYERS, "--seeds", SEEDS),
    "finetune": _steps("finetune", ("sst2", "mrpc", "rte", "stsb"), "--regime", "finetune", "--pooling", TRAINED,
                       "--seeds", SEEDS, "--dtype", "auto"),
    "small-bert": _steps("small-bert", ("sst2", "mrpc", "rte", "stsb"), "--regime", "finetune-small",
                         "--pooling", TRAINED, "--seeds", SEEDS, "--dtype", "auto"),
    # the served QA head's recipe (docs/findings/demo-qa-head.md) on all 87,599 train questions
    "squad": _steps("squad", ("squad",), "--regime", "finetune-lora-plus", "--train-set", "full", "--dtype", "bf16",
                    "--seeds", "0", "--epochs", "1", "--no-activation-checkpointing"),
}


@dataclass(frozen=True)
class Suite:
    name: str
    what: str
    groups: tuple[str, ...]
    tasks: dict[str, tuple[str, ...]] | None = None  # group -> the tasks kept of it (None: every task)

    def steps(self) -> list[Step]:
        keep = self.tasks or {}
        return [s for g in self.groups for s in GROUPS[g] if g not in keep or s.task in keep[g]]


SUITES = {s.name: s for s in (
    Suite("twin-heads", "every head of a BERT pre-trained here (issue 41, items 5 and 6): its NSP head, the frozen "
                        "probes of every task, SST-2 at every layer, both fine-tuning protocols, SQuAD",
          ("nsp-head", "probes", "layers", "finetune", "small-bert", "squad")),
    Suite("seed-spread", "what a second pre-training seed is compared on (issue 41, item 4): its NSP head, the "
                         "frozen probes, the small-BERT fine-tunes of MRPC and STS-B",
          ("nsp-head", "probes", "small-bert"), {"small-bert": ("mrpc", "stsb")}),
    Suite("derived-heads", "every head of an encoder continued from all-MiniLM-L6-v2 (issue 43): its NSP head, the "
                           "frozen probes, the 4,000-example fine-tunes, the small-BERT protocol on the pair tasks, "
                           "SQuAD", ("nsp-head", "probes", "finetune", "small-bert", "squad"),
          {"small-bert": ("mrpc", "rte", "stsb")}),
    Suite("small-bert-peer", "the small-BERT protocol on MRPC, RTE and STS-B (issue 41, item 5: where it meets "
                             "the 4,000-example protocol on one model)", ("small-bert",),
          {"small-bert": ("mrpc", "rte", "stsb")}),
)}


def get(name: str) -> Suite:
    if name not in SUITES:
        raise BertevalError(f"no suite {name!r}; suites: {', '.join(SUITES)}")
    return SUITES[name]


def select(steps: list[Step], only: str | None) -> list[Step]:
    """The steps whose group or task `--only` names (comma-separated); every step when it is not given."""
    if not only:
        return steps
    wanted = {w.strip() for w in only.split(",") if w.strip()}
    known = {s.group for s in steps} | {s.task for s in steps}
    if wanted - known:
        raise BertevalError(f"--only {only!r}: {', '.join(sorted(wanted - known))} is not a group or task of this "
                            f"suite; it has {', '.join(sorted(known))}")
    return [s for s in steps if s.group in wanted or s.task in wanted]


def argv(step: Step, model: str, layers: int, common: list[str]) -> list[str]:
    """The `run` command line of one step; `layers` is the model's hidden-state count (embeddings included)."""
    options = [",".join(str(i) for i in range(layers)) if o == ALL_LAYERS else o for o in step.options]
    return ["run", "--task", step.task, "--model", model, *options, *common]


def add_arguments(p) -> None:
    p.add_argument("suite", choices=sorted(SUITES), help="which suite: " + "; ".join(
        f"{s.name}: {s.what}" for s in SUITES.values()))
    p.add_argument("--model", required=True, help="as `run --model` takes it (a twin's name, default+<variant>, "
                                                   "a folder, a hub id)")
    p.add_argument("--only", default=None, help="comma-separated groups or tasks to keep, e.g. probes or sst2,mrpc")
    p.add_argument("--data-dir", default=None, help="folder holding the task data (default: BERTEVAL_DATA)")
    p.add_argument("--out", default=None, help="results folder (default: leaderboard/results)")
    p.add_argument("--device", default="auto", help="as `run --device`")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument("--plan", action="store_true", help="list each step's cells, present or to run, and stop (loads "
                                                       "no model; exit 1 when some would run)")
