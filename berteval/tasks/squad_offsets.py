"""Which occurrence of an answer text is the answer: a rule for the reconstructed SQuAD train set.

`squad/train-v1.1-reconstructed.json` was rebuilt from the official explorer pages, which give each
answer's text but not its offset; it places every answer at the text's first occurrence. For the
10.8% of answers whose text occurs more than once in its context, the official offset may be a later
one, and a span head trained on the wrong occurrence learns the wrong span. The rule here
(`RULE`): among the occurrences, the one whose sentence (the text between the sentence ends around
it) shares the most words with the question, stop words left out; ties go to the first occurrence,
so an unambiguous answer is never moved.

It was chosen on the official dev set, whose offsets are known (the first-occurrence rule and
windows of 50-200 characters, plain or distance-weighted, were the other candidates), and checked on
the 17 official train articles of `squad/train-subset.json`, which took no part in choosing it:

    python -m berteval.tasks.squad_offsets --data-dir ../shared/data

prints the agreement of both rules with the official offsets on both files (docs/findings/squad.md
quotes it). Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

RULE = ("the occurrence whose sentence shares the most non-stop-word words with the question (ties: the first); "
        "chosen on SQuAD v1.1 dev, checked on the 17 official train articles")
STOP = frozenset(("the a an of in on at to for and or is was were be by with as from that this which who what when "
                  "where why how did does do its it his her their").split())
_WORD = re.compile(r"\w+")


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in STOP}


def occurrences(context: str, text: str) -> list[int]:
    out, i = [], context.find(text)
    while i != -1:
        out.append(i)
        i = context.find(text, i + 1)
    return out


def _sentence_around(context: str, start: int, end: int) -> str:
    left = context.rfind(". ", 0, start)
    right = context.find(". ", end)
    return context[max(left, 0) : start] + " " + context[end : len(context) if right == -1 else right]


def pick(context: str, question: str, text: str) -> int:
    """The offset the rule gives (-1 when the text is not in the context)."""
    found = occurrences(context, text)
    if len(found) <= 1:
        return found[0] if found else -1
    asked = _words(question)
    best, best_score = found[0], -1
    for start in found:
        score = len(asked & _words(_sentence_around(context, start, start + len(text))))
        if score > best_score:
            best, best_score = start, score
    return best


def agreement(path: Path) -> dict:
    """How often the first occurrence and the rule give the file's own offsets (all answers, ambiguous ones)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))["data"]
    n = n_amb = first_ok = rule_ok = first_amb = rule_amb = 0
    for art in data:
        for para in art["paragraphs"]:
            ctx = para["context"]
            for qa in para["qas"]:
                for ans in qa["answers"]:
                    found = occurrences(ctx, ans["text"])
                    ambiguous = len(found) > 1
                    f = bool(found) and found[0] == ans["answer_start"]
                    r = pick(ctx, qa["question"], ans["text"]) == ans["answer_start"]
                    n += 1
                    first_ok += f
                    rule_ok += r
                    if ambiguous:
                        n_amb += 1
                        first_amb += f
                        rule_amb += r
    return {"file": Path(path).name, "answers": n, "ambiguous": n_amb,
            "first_occurrence": {"all": round(first_ok / n, 4), "ambiguous": round(first_amb / max(1, n_amb), 4),
                                 "right": first_ok, "right_ambiguous": first_amb},
            "rule": {"all": round(rule_ok / n, 4), "ambiguous": round(rule_amb / max(1, n_amb), 4),
                     "right": rule_ok, "right_ambiguous": rule_amb}}


def relocate(doc: dict) -> tuple[dict, dict]:
    """The reconstructed train set with every answer at the rule's occurrence; counts of what moved."""
    moved = ambiguous = 0
    for art in doc["data"]:
        for para in art["paragraphs"]:
            ctx = para["context"]
            for qa in para["qas"]:
                for ans in qa["answers"]:
                    if len(occurrences(ctx, ans["text"])) > 1:
                        ambiguous += 1
                        new = pick(ctx, qa["question"], ans["text"])
                        if new != ans["answer_start"]:
                            ans["answer_start"] = new
                            moved += 1
    return doc, {"rule": RULE, "ambiguous_answers": ambiguous, "moved": moved}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m berteval.tasks.squad_offsets", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", required=True, help="the folder holding squad/ (e.g. ../shared/data)")
    args = ap.parse_args(argv)
    for name in ("dev-v1.1.json", "train-subset.json"):
        res = agreement(Path(args.data_dir) / "squad" / name)
        print(f"{res['file']}: {res['answers']:,} answers, {res['ambiguous']:,} whose text occurs more than once")
        for key in ("first_occurrence", "rule"):
            r = res[key]
            print(f"  {key:<17} right for {r['right']:,} ({r['all']:.2%}); of the ambiguous, {r['right_ambiguous']:,} "
                  f"({r['ambiguous']:.2%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
