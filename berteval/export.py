"""`python -m berteval export model-index --model NAME [--out FILE]`: a model card's results, from the records.

Writes the `model-index` block of a Hugging Face model card (YAML), the structure the hub
parses into evaluation results: one result per task, regime and pooling the model has records
for (the last layer where there is one), each with its task type, dataset (name, hub type,
config, split, and as revision the sha256 of the examples as scored: the records say what was
scored, not which hub commit it came from), the main metric (and its siblings, e.g. SQuAD EM
beside F1) as the mean over seeds, a metric name and config that spell out pooling and regime,
args with seeds, spread, interval, example counts and the record ids behind the number, and a
source. huggingface_hub's own parser reads it back (tests/leaderboard/test_export_disagree.py). Torch-free.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import yaml

from . import record_lookup
from .errors import BertevalError
from .records import RunRecord, read_records
from .stats import summarise
from .store import Store, write_atomic

# How each task appears on a model card: the hub's task type, and the dataset as the hub names it.
CARD = {
    "sst2": {"task": {"type": "text-classification", "name": "Sentiment classification"},
             "dataset": {"name": "GLUE SST-2", "type": "nyu-mll/glue", "config": "sst2"}},
    "squad": {"task": {"type": "question-answering", "name": "Extractive question answering"},
              "dataset": {"name": "SQuAD v1.1", "type": "rajpurkar/squad"}},
    "nsp": {"task": {"type": "text-classification", "name": "Next-sentence prediction"},
            "dataset": {"name": "NSP pairs from SQuAD v1.1 dev paragraphs (berteval nsp v1)",
                        "type": "rajpurkar/squad"}},
}
for _name, _label, _kind in (("mrpc", "GLUE MRPC", "Paraphrase detection"), ("rte", "GLUE RTE", "Textual entailment"),
                              ("stsb", "GLUE STS-B", "Semantic similarity (regression)"),
                              ("qnli", "GLUE QNLI (5-fold cross-validation over dev)", "Question-answer entailment")):
    CARD[_name] = {"task": {"type": "text-classification", "name": _kind},
                   "dataset": {"name": _label, "type": "nyu-mll/glue", "config": _name}}
REGIME_WORDS = {"probe": "frozen encoder, trained probe", "finetune": "fine-tuned",
                "finetune-lora": "fine-tuned with LoRA adapters (adapter and head committed)",
                "finetune-small": "fine-tuned, small-BERT protocol (whole train set, 4 epochs, lr chosen on "
                                  "held-out train)",
                "pretrained": "the checkpoint's own pretrained head"}
SOURCE_ENV = "BERTEVAL_SOURCE_URL"


def _card(task: str) -> dict:
    return CARD.get(task, {"task": {"type": task, "name": task}, "dataset": {"name": task, "type": task}})


def _source(url: str | None, fallback: str) -> dict:
    """Where the numbers come from: the option, $BERTEVAL_SOURCE_URL, the Space this runs in ($SPACE_ID, set on
    Spaces), else the records file's path in the repository (the parser needs a url beside a source name)."""
    url = url or os.environ.get(SOURCE_ENV)
    if not url and os.environ.get("SPACE_ID"):
        url = f"https://huggingface.co/spaces/{os.environ['SPACE_ID']}"
    return {"name": "berteval", "url": url or fallback}


def _rows(recs: list[RunRecord]) -> list[list[RunRecord]]:
    """One group of seeds per (task, regime, pooling): the last layer where recorded, and the main setup."""
    cells: dict[tuple, list[RunRecord]] = {}
    for r in recs:
        cells.setdefault((r.task, r.regime, r.pooling), []).append(r)
    out = []
    for key in sorted(cells):
        rs = cells[key]
        layers = {r.layer for r in rs}
        layer = -1 if -1 in layers else max(layers, key=lambda lay: sum(r.layer == lay for r in rs))
        out.append(sorted(record_lookup.main_setup([r for r in rs if r.layer == layer]), key=lambda r: r.seed))
    return out


def model_index(name: str, records: list[RunRecord], source_url: str | None = None,
                records_path: str = "leaderboard/results") -> list[dict]:
    """The model-index list for one model (raises BertevalError when it has no records)."""
    mid, recs = record_lookup.of_model(name, records)
    results = []
    for rs in _rows(recs):
        first = rs[0]
        layer = "last" if first.layer == -1 else str(first.layer)
        head = f"{first.pooling}, {REGIME_WORDS.get(first.regime, first.regime)}" + (
            "" if first.layer == -1 else f", layer {layer}")
        card = _card(first.task)
        names = [first.main_metric] + sorted(k for k in first.metrics if k != first.main_metric)
        metrics = []
        for metric in names:
            s = summarise(r.metrics[metric] for r in rs if metric in r.metrics)
            args = {"seeds": [r.seed for r in rs], "std": round(s.std, 6), "n_train": first.n_train,
                    "n_eval": first.n_eval, "dtype": first.dtype, "record_ids": [r.run_id for r in rs],
                    "command": record_lookup.command(first)}
            if s.n > 1:
                args["ci95"] = [round(s.ci95_low, 6), round(s.ci95_high, 6)]
            metrics.append({
                "type": metric, "value": round(s.mean, 4),
                "name": f"dev {metric.replace('_', ' ')} ({head}; mean of {s.n} seed{'s' if s.n != 1 else ''})",
                "config": f"pooling={first.pooling},regime={first.regime},layer={layer}",
                "args": args,
            })
        results.append({
            "task": dict(card["task"], name=f"{card['task']['name']} ({head})"),
            "dataset": {**card["dataset"], "split": first.split, "revision": f"sha256:{first.data_sha256}"},
            "metrics": metrics,
            "source": _source(source_url, f"{records_path}/{first.task}.jsonl"),
        })
    return [{"name": mid, "results": results}]


def to_yaml(index: list[dict]) -> str:
    return yaml.safe_dump({"model-index": index}, sort_keys=False, allow_unicode=True, width=120)


def command(args) -> int:
    store = Store(args.results)
    files = sorted(store.root.glob("*.jsonl"))
    records, problems = read_records(files)
    for p in problems:
        print(f"skipped {p}", file=sys.stderr)
    index = model_index(args.model, records, args.source_url, _shown(store.root))
    text = to_yaml(index)
    if args.card:
        return _write_card(args.model, index, store.root)
    if args.out:
        write_atomic(Path(args.out), text.encode("utf-8"))  # a cut write keeps the old file, and says so
        n = len(index[0]["results"])
        print(f"wrote {args.out}: model-index of {index[0]['name']}, {n} result(s)")
    else:
        sys.stdout.write(text)
    return 0


def _write_card(name: str, index: list[dict], root: Path) -> int:
    """A pre-trained twin's model card rendered again from its derivation record, now with the model-index."""
    import json

    from .pretrain import card as model_card
    from .models.pretrained import PRETRAINED, RECORD, folder

    if name not in PRETRAINED:
        raise BertevalError(f"--card writes the model card of a model berteval pre-trained ({', '.join(PRETRAINED)}); "
                            f"for {name} write the YAML with --out and paste it into its card")
    where = folder(name, root)
    record = json.loads((where / RECORD).read_text())
    write_atomic(where / "README.md", model_card.render(record, index).encode("utf-8"))
    print(f"wrote {where / 'README.md'}: the model card with {len(index[0]['results'])} result(s) in its model-index")
    return 0


def _shown(root: Path) -> str:
    try:
        return str(root.resolve().relative_to(Path.cwd().resolve())) or "."
    except ValueError:
        return str(root)


def add_arguments(p) -> None:
    sub = p.add_subparsers(dest="what", required=True)
    m = sub.add_parser("model-index", help="the model-index block of a Hugging Face model card, from the records")
    m.add_argument("--model", required=True, help="as --model of run: default, default+nsp-pooler, or a model id")
    m.add_argument("--out", default=None, help="YAML file to write (default: print it)")
    m.add_argument("--card", action="store_true",
                   help="a pre-trained twin (wiki-bert-mini, wiki-bert-mini-nonsp): write the index into its model "
                        "card, the card rendered again from its derivation.json")
    m.add_argument("--results", default=None, help="results folder (default $BERTEVAL_RESULTS, else the committed one)")
    m.add_argument("--source-url", default=None,
                   help=f"url of the source named in each result (default ${SOURCE_ENV}, the Space, else the records path)")
