"""What an NSP head learned, tested by editing its inputs (the deletion test).

A head that reads sentence order or topic gives a true continuation the same answer whether
or not B's final full stop is there; a head that reads "B ends a sentence" does not. So each
sentence pair is scored as given and after one edit of B's surface only:

- `stop_removed`: B's final sentence punctuation deleted (pairs whose B ends with . ! ?);
- `cut`: B cut mid-sentence (its last third of words dropped, no punctuation after);
- `cut_stop_added`: the same cut, then a "." appended.

Reported per label: how many pairs, the share the head calls IsNext, the mean P(IsNext).
Target (issue 41): on true continuations P(IsNext) falls by less than 10 points when only
the final "." is deleted. `python -m berteval.pretrain.edits <model> --data-dir D` prints the
table for the NSP dev sentence pairs; the model is named as `run --model` takes it (a twin's
name or folder, a derived encoder such as `default+mlm-nsp-wiki`) and scored through the one
path every NSP head takes (`berteval.heads.nsp`: refused where the head was never trained).
"""

from __future__ import annotations

import argparse
import json
import re
import sys

END = re.compile(r"[.!?][\"')\]]*\s*$")
EDITS = ("as_given", "stop_removed", "cut", "cut_stop_added")


def edit(b: str, how: str) -> str | None:
    """B after the edit `how`, or None where the edit does not apply."""
    if how == "as_given":
        return b
    if how == "stop_removed":
        return END.sub("", b).rstrip() if END.search(b) else None
    words = b.split()
    if len(words) < 4:
        return None
    cut = " ".join(words[: max(2, (2 * len(words)) // 3)]).rstrip(".!?,;:")
    return cut if how == "cut" else cut + "."


def p_is_next(model, tokenizer, pairs: list[tuple[str, str]], batch: int = 64, max_length: int = 128) -> list[float]:
    """P(IsNext) of the model's NSP head (label 0) for each (A, B)."""
    import torch

    out: list[float] = []
    model.eval()
    with torch.no_grad():
        for i in range(0, len(pairs), batch):
            part = pairs[i : i + batch]
            enc = tokenizer([a for a, _ in part], [b for _, b in part], truncation=True, max_length=max_length,
                            padding=True, return_tensors="pt")
            # The NSP head on the pooler only: BertForPreTraining's forward would also project every token onto
            # the vocabulary (the masked-LM logits), most of the time for nothing here.
            logits = model.cls.seq_relationship(model.bert(**enc).pooler_output)
            out += torch.softmax(logits.float(), -1)[:, 0].tolist()
    return out


def deletion_test(p_of, pairs: list[tuple[str, str, int]], limit: int | None = 2000) -> dict:
    """{label: {edit: {n, is_next_share, mean_p_is_next}}} over up to `limit` pairs of each label; `p_of` maps
    a list of (A, B) to P(IsNext) of each."""
    result: dict = {}
    for label, name in ((0, "IsNext"), (1, "NotNext")):
        mine = [(a, b) for a, b, y in pairs if y == label][:limit]
        result[name] = {}
        for how in EDITS:
            edited = [(a, e) for a, b in mine if (e := edit(b, how)) is not None]
            p = list(p_of(edited)) if edited else []
            result[name][how] = {"n": len(edited),
                                 "is_next_share": round(sum(x > 0.5 for x in p) / max(1, len(p)), 4),
                                 "mean_p_is_next": round(sum(p) / max(1, len(p)), 4)}
    base = result["IsNext"]["as_given"]["mean_p_is_next"]
    result["stop_removed_drop_on_true_pairs"] = round(base - result["IsNext"]["stop_removed"]["mean_p_is_next"], 4)
    return result


def record(model, tokenizer, pairs: list[tuple[str, str, int]]) -> dict:
    """The deletion test as a trained NSP head's record holds it (`derivation.json`: the twins pre-trained here and
    the encoders continued with NSP), on the NSP dev sentence pairs the run evaluates on."""
    return {"pairs": "NSP dev sentence pairs (berteval.tasks.nsp), up to 2,000 of each label",
            **deletion_test(lambda part: p_is_next(model, tokenizer, part), pairs)}


def markdown(result: dict) -> str:
    rows = ["| pairs | edit of B | n | called IsNext | mean P(IsNext) |", "|---|---|---|---|---|"]
    for name in ("IsNext", "NotNext"):
        for how in EDITS:
            r = result[name][how]
            rows.append(f"| {name} | {how} | {r['n']:,} | {r['is_next_share']:.3f} | {r['mean_p_is_next']:.3f} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    from pathlib import Path

    from .. import models
    from ..errors import BertevalError
    from ..heads.nsp import pretrained_proba
    from . import loop

    parser = argparse.ArgumentParser(prog="python -m berteval.pretrain.edits", description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a model with a trained NSP head, as `run --model` takes it (a twin's name or "
                                      "folder, default+mlm-nsp-wiki, a hub id)")
    parser.add_argument("--data-dir", required=True, help="folder holding squad/dev-v1.1.json (../shared/data)")
    parser.add_argument("--limit", type=int, default=2000, help="pairs of each label (default 2000)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    try:
        loaded = models.load(args.model)
        result = deletion_test(lambda pairs: pretrained_proba(loaded, pairs)[:, 0].tolist(),
                               loop.nsp_dev_pairs(Path(args.data_dir)), args.limit)
    except BertevalError as exc:  # a model with no trained NSP head, a missing data folder: one line, exit 2
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"model": loaded.model_id, "revision": loaded.revision, **result}, indent=1) if args.json
          else markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
