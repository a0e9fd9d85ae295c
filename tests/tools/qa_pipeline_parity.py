"""Parity check: berteval's span decoding vs transformers' question-answering pipeline,
on the same fine-tuned model and the same dev questions.

transformers 5 dropped the question-answering pipeline, so the reference side runs in a
second interpreter that has transformers 4.x (e.g. a venv made with
`python -m venv --system-site-packages /tmp/tf4 && /tmp/tf4/bin/pip install "transformers<5"`).
This script merges the committed LoRA adapter into a plain BertForQuestionAnswering
folder, answers the first N dev questions with berteval, asks the reference interpreter
to answer them with the pipeline (same max answer length, window and stride), and prints
the agreement.

    python tests/tools/qa_pipeline_parity.py --reference-python /tmp/tf4/bin/python --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def reference(model_dir: str, questions_file: str, max_answer_length: int, max_length: int, stride: int) -> None:
    from transformers import pipeline

    pipe = pipeline("question-answering", model=model_dir, tokenizer=model_dir, device=-1)
    items = json.loads(Path(questions_file).read_text())
    out = {}
    for it in items:
        got = pipe(question=it["question"], context=it["context"], max_answer_len=max_answer_length,
                   max_seq_len=max_length, doc_stride=stride)
        out[it["id"]] = got["answer"]
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reference-python", required=False)
    ap.add_argument("--data-dir", default="../shared/data")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--max-answer-length", type=int, default=30)
    ap.add_argument("--reference-mode", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.reference_mode:
        reference(args.reference_mode[0], args.reference_mode[1], args.max_answer_length, 384, 128)
        return

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from berteval import qa, squad_metrics
    from berteval.tasks import get

    model = qa.demo_model()
    dev = get("squad").load(Path(args.data_dir)).eval[: args.n]
    ours = {e.id: qa.answer(model, e.question, e.context, max_answer_length=args.max_answer_length).nbest[0].text
            for e in dev}
    with tempfile.TemporaryDirectory() as tmp:
        model.model.save_pretrained(tmp)
        model.tokenizer.save_pretrained(tmp)
        qfile = Path(tmp) / "questions.json"
        qfile.write_text(json.dumps([{"id": e.id, "question": e.question, "context": e.context} for e in dev]))
        proc = subprocess.run([args.reference_python, __file__, "--reference-mode", tmp, str(qfile),
                               "--max-answer-length", str(args.max_answer_length)],
                              capture_output=True, text=True, check=True)
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    same = sum(ours[k].strip() == theirs[k].strip() for k in ours)
    same_norm = sum(squad_metrics.normalize_answer(ours[k]) == squad_metrics.normalize_answer(theirs[k]) for k in ours)
    golds = {e.id: list(e.answers) for e in dev}
    print(f"questions: {len(ours)}")
    print(f"identical answers: {same} ({100 * same / len(ours):.1f}%)")
    print(f"identical after SQuAD normalisation: {same_norm} ({100 * same_norm / len(ours):.1f}%)")
    print(f"berteval EM/F1 on these: {squad_metrics.score(ours, golds)}")
    print(f"pipeline EM/F1 on these: {squad_metrics.score(theirs, golds)}")
    for k in [k for k in ours if ours[k].strip() != theirs[k].strip()][:10]:
        print(f"  differs {k}: berteval {ours[k]!r} | pipeline {theirs[k]!r}")


if __name__ == "__main__":
    main()
