"""The model card (README.md) of a model pre-trained here, generated from its derivation record.

Hugging Face cards are Markdown with YAML front matter; the front matter's `model-index`
(task results) comes from `berteval export model-index` once records exist, and is passed in.
Every number on the card is read from the record: nothing is typed by hand.
"""

from __future__ import annotations

import yaml


def render(record: dict, model_index: list | None = None) -> str:
    final = record.get("final", {})
    ex = record.get("examples", {})
    text = ex.get("text", {})
    tr = record.get("training", {})
    hyper = record.get("hyperparameters", {})
    front = {"language": ["en"], "license": "cc-by-sa-3.0", "library_name": "transformers",
             "tags": ["bert", "fill-mask", "next-sentence-prediction", "berteval"],
             "pipeline_tag": "fill-mask", "datasets": ["wikipedia"]}
    if model_index:
        front["model-index"] = model_index
    held = final.get("heldout", {})
    lines = [
        "---", yaml.safe_dump(front, sort_keys=False).strip(), "---", "",
        f"# {record['name']}", "",
        record.get("summary", ""), "",
        f"Objective: {record.get('objective', '')}.", "",
        "Made by `berteval` (the command below), from the BERT paper's recipe (Devlin et al. 2019, Section 3.1 and "
        "Appendix A). Load it with any transformers Auto class, e.g. `AutoModelForPreTraining`, "
        "`AutoModelForMaskedLM`, `AutoModelForNextSentencePrediction` or `pipeline(\"fill-mask\", model=...)`.", "",
        "## Shape", "",
        f"{hyper.get('layers')} layers, hidden {hyper.get('hidden_size')}, {hyper.get('heads')} heads, intermediate "
        f"{hyper.get('intermediate_size')}, uncased WordPiece vocabulary of "
        f"{ex.get('vocabulary', {}).get('vocab_size', '?'):,} trained on the training text, 512 positions.", "",
        "## Training data", "",
        f"English Wikipedia (a 2015 dump's first {text.get('articles_read', 0):,} articles), minus the "
        f"{len(text.get('excluded_squad_dev_title', []))} SQuAD v1.1 dev articles present and the "
        f"{text.get('excluded_nsp_dev_sentence', {}).get('articles', 0):,} other articles containing a sentence of "
        f"berteval's NSP dev pairs; {text.get('heldout', {}).get('articles', 0):,} articles (1%) held out. "
        f"{text.get('train_articles', 0):,} training articles.", "",
        "## Training", "",
        f"{tr.get('steps', 0):,} steps, {tr.get('tokens_seen', 0):,} tokens ({tr.get('sequences_seen', 0):,} "
        f"sequences), {tr.get('train_wall_s', 0) / 3600:.2f} h of training ({_ran(record)}); evaluated in "
        f"{record.get('dtype')} on {record.get('device', '?')}; lr {hyper.get('lr')}, warm-up "
        f"{hyper.get('warmup_steps')} steps then linear decay; {_phases(hyper)}.", "",
        f"Command: `{record.get('command', '')}`", "",
        *([_stopped_early(record['stopped_early']), ""] if record.get("stopped_early") else []),
        "## Held-out results (at the end of training)", "",
        "| measure | value | examples |", "|---|---|---|",
        f"| masked-LM accuracy, held-out articles (128 tokens) | {held.get('mlm_accuracy')} | {held.get('n')} |",
        f"| masked-LM loss, held-out articles | {held.get('mlm_loss')} | {held.get('n')} |",
        f"| NSP accuracy, held-out segment pairs | {held.get('nsp_accuracy')} | {held.get('n')} |",
        f"| NSP accuracy, held-out sentence pairs | {final.get('heldout_sentence_pairs', {}).get('nsp_accuracy')} | "
        f"{final.get('heldout_sentence_pairs', {}).get('n')} |",
        f"| NSP accuracy, berteval's NSP dev pairs (SQuAD dev articles) | "
        f"{final.get('nsp_dev_pairs', {}).get('nsp_accuracy')} | {final.get('nsp_dev_pairs', {}).get('n')} |",
        "",
    ]
    if not record.get("nsp_trained", True):
        lines += ["The NSP head and pooler of this model were never trained (the NSP loss was removed): its NSP "
                  "accuracy is that of a random initialisation, shown as the control.", ""]
    lines += ["Everything about the run (checksums of every input, curves, versions) is in `derivation.json`.", ""]
    return "\n".join(lines)


def _ran(record: dict) -> str:
    """What trained the steps, from the run's segments (one per working session): a run spans sessions on CPUs
    that differ, and the precision each ran in is its own (bf16 where the CPU computes it natively). A segment
    that trained no step (a snapshot published from committed weights) is left out."""
    tr = record.get("training", {})
    segments = tr.get("segments") or []
    if not segments:
        return f"{record.get('dtype')} on {record.get('device', '?')}"
    ends = [s["from_step"] for s in segments[1:]] + [tr.get("steps", 0)]
    steps: dict[tuple, int] = {}
    for seg, end in zip(segments, ends):
        if end > seg["from_step"]:
            key = (seg.get("dtype"), seg.get("device"))
            steps[key] = steps.get(key, 0) + end - seg["from_step"]
    sessions = sum(end > seg["from_step"] for seg, end in zip(segments, ends))
    return (f"{sessions} working session{'s' * (sessions != 1)}: "
            + "; ".join(f"{n:,} steps in {dtype} on {device}" for (dtype, device), n in steps.items()))


def _stopped_early(stop: dict) -> str:
    where = f"step {stop['at_step']:,} of the {stop['planned_steps']:,} planned ({stop['completed_share']:.0%})"
    if stop.get("snapshot_of"):
        return (f"**A snapshot**: the weights of `{stop['snapshot_of']}` at {where}, published from that run, which "
                f"goes on; not reached: {stop['not_reached']}.")
    return f"**Stopped early**: published at {where}; not reached: {stop['not_reached']}."


def _phases(hyper: dict) -> str:
    """The schedule's sequence lengths in words: batch x tokens for each share of the steps."""
    tiny, long = hyper.get("tiny_share", 0.0) or 0.0, hyper.get("long_share", 0.0)
    parts = [f"batch {hyper.get('tiny_batch_size')} x 32 tokens for the first {tiny:.0%} of the steps (a phase "
             "BERT does not have: it moves a small model off the unigram plateau)"] if tiny else []
    parts.append(f"batch {hyper.get('batch_size')} x 128 tokens for {1 - tiny - long:.0%}")
    parts.append(f"{hyper.get('long_batch_size')} x 512 for the last {long:.0%}")
    return ", ".join(parts)

