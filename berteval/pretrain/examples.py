"""The pre-training examples, built once and kept in a verified cache: text -> sentences ->
WordPiece vocabulary -> segment pairs -> masked sequences, as flat arrays.

Both twins read the same prepared folder, so they see the very same examples (and, through
the same seeded order, in the same order). The steps (each in its own module):
`wikipedia` (filtered articles, 1% held out) -> `sentences` (Punkt) -> `vocab` (WordPiece on
the training sentences) -> `segments` (BERT's pairs, NotNext with no length cue) ->
`masking` (15%: 80/10/10). Two sequence lengths, as BERT: 128 tokens for most steps and
`LONG` (512) for the last share, so position embeddings past 128 are trained too (SQuAD
reads 384-token windows).

Arrays (`Sequences`): corrupted ids (N, T) uint16 (0 = [PAD]), length and |A| per row,
the NSP label, and up to P masked positions with their original ids (-1 = none). The folder
`$BERTEVAL_CACHE/pretrain/<key>` (key: every input that shapes the examples) is written
under a temporary name and renamed when complete; `manifest.json` holds each file's
sha256, checked before use, so a cut or altered cache is rebuilt, never trained on.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import BertevalError
from ..seeds import numpy_rng
from . import cues, pairs
from . import masking, sentences, vocab, wikipedia

SCHEMA = 2  # 2: cue-free pairs (berteval.pretrain.pairs) with their audit, paragraph starts, passes
TINY = 32  # the first phase's pairs (not BERT's: see pretrain.py), when asked for
SHORT = 128
LONG = 512
MAX_PREDICTIONS = {TINY: 5, SHORT: 20, LONG: 80}  # BERT's max_predictions_per_seq for each length (15%)
EVAL_SEQUENCES = 4_096  # held-out segment pairs scored at each evaluation (all at the end)
ARRAYS = ("ids", "length", "a_len", "nsp", "mlm_pos", "mlm_tgt")


@dataclass
class Sequences:
    ids: np.ndarray  # (N, T) uint16: [CLS] A [SEP] B [SEP], masked, 0-padded
    length: np.ndarray  # (N,) int16: tokens before padding
    a_len: np.ndarray  # (N,) int16: tokens of A (segment 0 = [CLS] A [SEP])
    nsp: np.ndarray  # (N,) uint8: 0 IsNext, 1 NotNext
    mlm_pos: np.ndarray  # (N, P) int16: masked positions, -1 padded
    mlm_tgt: np.ndarray  # (N, P) uint16: original ids at those positions

    def __len__(self) -> int:
        return len(self.length)

    def take(self, index) -> "Sequences":
        return Sequences(*(getattr(self, k)[index] for k in ARRAYS))

    def tokens(self) -> int:
        return int(self.length.astype(np.int64).sum())


class FlatDocuments:
    """Documents (lists of sentences of ids) over one flat id array: ~85 M ids in numpy, not Python lists."""

    def __init__(self, ids: np.ndarray, sentence_ends: np.ndarray, doc_ends: np.ndarray, order=None,
                 paragraph_start: np.ndarray | None = None):
        self.ids, self.sentence_ends, self.doc_ends = ids, sentence_ends, doc_ends
        self.order = np.arange(len(doc_ends)) if order is None else np.asarray(order)
        # (S,) bool: the sentence opens a paragraph (a text line); the cue audit tests B's paragraph starts
        self.paragraph_start = paragraph_start

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, d: int) -> list[list[int]]:
        k = int(self.order[d])
        s0 = int(self.doc_ends[k - 1]) if k else 0
        ends = self.sentence_ends[s0 : int(self.doc_ends[k])]
        starts = np.concatenate([[int(self.sentence_ends[s0 - 1]) if s0 else 0], ends[:-1]])
        return [self.ids[a:b].tolist() for a, b in zip(starts, ends)]

    def paragraph_starts(self, d: int) -> list[bool]:
        k = int(self.order[d])
        s0 = int(self.doc_ends[k - 1]) if k else 0
        if self.paragraph_start is None:
            return [j == s0 for j in range(s0, int(self.doc_ends[k]))]
        return self.paragraph_start[s0 : int(self.doc_ends[k])].tolist()

    def tokens(self, d: int) -> int:
        k = int(self.order[d])
        s0 = int(self.doc_ends[k - 1]) if k else 0
        start = int(self.sentence_ends[s0 - 1]) if s0 else 0
        end = int(self.sentence_ends[int(self.doc_ends[k]) - 1]) if int(self.doc_ends[k]) > s0 else start
        return end - start

    def subset(self, order) -> "FlatDocuments":
        return FlatDocuments(self.ids, self.sentence_ends, self.doc_ends, self.order[np.asarray(order)],
                             self.paragraph_start)


def tokenize_documents(articles, splitter, tokenizer, batch: int = 50_000) -> tuple[FlatDocuments, dict]:
    """Every article's text lines -> Punkt sentences -> WordPiece ids, flattened."""
    t0 = time.perf_counter()
    sents, doc_ends, paragraph = [], [], []
    dropped_lines = kept_lines = 0
    for art in articles:
        for line in art.lines:
            if not sentences.is_text(line):
                dropped_lines += 1
                continue
            kept_lines += 1
            split = splitter.split(line)
            sents += split
            paragraph += [True] + [False] * (len(split) - 1) if split else []
        doc_ends.append(len(sents))
    t1 = time.perf_counter()
    # A copy with padding and truncation off: a tokenizer saved with a model (a reused vocabulary) may pad every
    # sentence to its max length, which would fill the documents with [PAD].
    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_padding()
    backend.no_truncation()
    chunks, lengths = [], []
    for i in range(0, len(sents), batch):
        for enc in backend.encode_batch(sents[i : i + batch], add_special_tokens=False):
            chunks.append(np.asarray(enc.ids, dtype=np.uint16))
            lengths.append(len(enc.ids))
    ids = np.concatenate(chunks) if chunks else np.zeros(0, np.uint16)
    docs = FlatDocuments(ids, np.cumsum(lengths).astype(np.int64), np.asarray(doc_ends, dtype=np.int64),
                         paragraph_start=np.asarray(paragraph, dtype=bool))
    words = sum(len(s.split()) for s in sents)
    stats = {"documents": len(articles), "text_lines": kept_lines, "dropped_short_lines": dropped_lines,
             "sentences": len(sents), "words": words, "wordpiece_tokens": int(len(ids)),
             "split_s": round(t1 - t0, 1), "split_words_per_s": round(words / max(1e-9, t1 - t0)),
             "tokenize_s": round(time.perf_counter() - t1, 1)}
    return docs, stats


def _mask_rows(rows, tokenizer, max_predictions: int, rng, width: int) -> tuple[Sequences, dict]:
    """Mask `rows` of (ids of [CLS] A [SEP] B [SEP], |A|, label) into arrays."""
    rule = masking.MaskingRule(max_predictions=max_predictions)
    random_ids = masking.replacement_ids(tokenizer)
    cls, sep, mask = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id
    n = len(rows)
    out = Sequences(np.zeros((n, width), np.uint16), np.zeros(n, np.int16), np.zeros(n, np.int16),
                    np.zeros(n, np.uint8), np.full((n, max_predictions), -1, np.int16),
                    np.zeros((n, max_predictions), np.uint16))
    kinds = np.zeros(3, np.int64)
    for r, (packed, a_len, label) in enumerate(rows):
        ids = packed.astype(np.int64)
        special = (ids == cls) | (ids == sep)
        corrupted, labels = masking.mask_tokens(ids, ~special, rule, mask, random_ids, rng)
        pos = np.flatnonzero(labels != masking.IGNORE)
        out.ids[r, : len(ids)] = corrupted
        out.length[r], out.a_len[r], out.nsp[r] = len(ids), a_len, label
        out.mlm_pos[r, : len(pos)] = pos
        out.mlm_tgt[r, : len(pos)] = ids[pos]
        kinds += [int((corrupted[pos] == mask).sum()), int((corrupted[pos] == ids[pos]).sum()), len(pos)]
    stats = {"masked_tokens": int(kinds[2]), "replaced_by_mask": int(kinds[0]), "unchanged": int(kinds[1]),
             "replaced_by_random": int(kinds[2] - kinds[0] - kinds[1]), **rule.as_dict()}
    return out, stats


def build_sequences(docs: FlatDocuments, tokenizer, length: int, seed: int, streams: tuple[str, str],
                    short_seq_prob: float = pairs.SHORT_SEQ_PROB, limit: int | None = None
                    ) -> tuple[Sequences, dict]:
    """One pass of cue-free NSP pairs (`berteval.pretrain.pairs`) over `docs` (the first `limit`, in document
    order), labels exactly 50/50, masked; with the pair statistics and the cue audit of the first pairs."""
    rng = numpy_rng(seed, streams[0])
    stats = pairs.PairStats()
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    rows = []  # compact while streaming: ~700 k pairs as Python ints would take gigabytes
    audited = []  # the first pairs as built, for the cue audit
    for x in pairs.one_pass(docs, length - 3, short_seq_prob, rng, stats):
        rows.append((np.asarray(pairs.encode(x, cls, sep), dtype=np.uint16), len(x.tokens_a), x.label))
        if len(audited) < cues.MAX_PAIRS:
            audited.append(x)
        if limit is not None and len(rows) >= limit * 1.05 + 16:  # a little spare: balancing drops a few
            break
    labels = np.array([r[2] for r in rows])
    n_next = int((labels == pairs.IS_NEXT).sum())
    n_not = len(rows) - n_next
    surplus_label = pairs.NOT_NEXT if n_not > n_next else pairs.IS_NEXT
    drop = set(rng.choice(np.flatnonzero(labels == surplus_label), abs(n_not - n_next), replace=False).tolist())
    rows = [x for k, x in enumerate(rows) if k not in drop]
    if limit is not None and len(rows) > limit:
        rows = _balanced_prefix(rows, limit)
    seqs, mask_stats = _mask_rows(rows, tokenizer, MAX_PREDICTIONS.get(length, round(0.15 * length)),
                                  numpy_rng(seed, streams[1]), length)
    b_len = (seqs.length - seqs.a_len - 3).astype(np.float64)
    record = {"max_length": length, "short_seq_prob": short_seq_prob, "builder": "berteval.pretrain.pairs",
              "sequences": len(seqs), "tokens": seqs.tokens(), "no_continuation": stats.no_continuation,
              "dropped_to_balance": len(drop), "short_target": stats.short_target, "truncated": stats.truncated,
              "b_ran_out": stats.b_ran_out, "is_next": int((seqs.nsp == 0).sum()), "not_next": int((seqs.nsp == 1).sum()),
              "mean_length_by_label": {name: round(float(seqs.length[seqs.nsp == lab].mean()), 2)
                                       for name, lab in (("IsNext", 0), ("NotNext", 1)) if (seqs.nsp == lab).any()},
              "mean_b_length_by_label": {name: round(float(b_len[seqs.nsp == lab].mean()), 2)
                                         for name, lab in (("IsNext", 0), ("NotNext", 1)) if (seqs.nsp == lab).any()},
              "cue_audit": cues.audit(audited, [x.label for x in audited], tokenizer, seed) if len(audited) >= 50
              else None, "masking": mask_stats, "sha256": sequences_sha256(seqs)}
    return seqs, record


def concatenate(parts: list[Sequences]) -> Sequences:
    """Passes of one length as one training set (rows in pass order; the batch order permutes them)."""
    return Sequences(*(np.concatenate([getattr(p, k) for p in parts]) for k in ARRAYS))


def _balanced_prefix(rows, limit: int):
    """The first rows holding limit/2 of each label, in order."""
    want = limit // 2
    seen = {pairs.IS_NEXT: 0, pairs.NOT_NEXT: 0}
    out = []
    for x in rows:
        if seen[x[2]] < want:
            seen[x[2]] += 1
            out.append(x)
    return out


def sequences_sha256(seqs: Sequences) -> str:
    digest = hashlib.sha256()
    for k in ARRAYS:
        digest.update(np.ascontiguousarray(getattr(seqs, k)).tobytes())
    return digest.hexdigest()


# -- the cache folder ---------------------------------------------------------------------------------------------

@dataclass
class Prepared:
    folder: Path
    tokenizer: object
    train: Sequences  # SHORT
    train_long: Sequences  # LONG
    heldout: Sequences  # SHORT, held-out articles
    heldout_long: Sequences  # LONG, held-out articles
    heldout_pairs: list[tuple[str, str, int]]  # sentence pairs of the held-out articles (berteval.nsp_pairs rules)
    record: dict
    train_tiny: Sequences | None = None  # TINY, when prepared with tiny_sequences


def cache_key(inputs: dict) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


def _save(folder: Path, name: str, seqs: Sequences) -> None:
    with open(folder / f"{name}.npz", "wb") as fh:
        np.savez(fh, **{k: getattr(seqs, k) for k in ARRAYS})
        fh.flush()
        os.fsync(fh.fileno())


def _load(folder: Path, name: str) -> Sequences:
    with np.load(folder / f"{name}.npz") as z:
        return Sequences(*(z[k] for k in ARRAYS))


def _verify(folder: Path) -> dict | None:
    """The manifest, if every file it lists has its recorded sha256; None otherwise."""
    manifest = folder / "manifest.json"
    if not manifest.is_file():
        return None
    try:
        meta = json.loads(manifest.read_text())
    except ValueError:
        return None
    for rel, sha in meta.get("files", {}).items():
        path = folder / rel
        if not path.is_file() or wikipedia.file_sha256(path) != sha:
            return None
    return meta


def _inputs(data_dir: Path, seed: int, hyper: dict) -> dict:
    """What names the prepared examples (their cache key): the text's checksums, the seed, the building options."""
    shard_sums = {p.name: wikipedia.file_sha256(p) for p in wikipedia.shards(Path(data_dir))}
    dev_sum = wikipedia.file_sha256(Path(data_dir) / wikipedia.SQUAD_DEV) if (
        Path(data_dir) / wikipedia.SQUAD_DEV).is_file() else None
    inputs = {"schema": SCHEMA, "seed": seed, "shards": shard_sums, "squad_dev": dev_sum,
              **{k: hyper[k] for k in ("vocab_size", "short_seq_prob", "long_sequences", "limit_articles")}}
    if int(hyper.get("short_passes", 1)) > 1:
        inputs["short_passes"] = int(hyper["short_passes"])
    if hyper.get("tiny_sequences"):  # only then: a set prepared without the 32-token phase keeps its cache key
        inputs["tiny_sequences"] = int(hyper["tiny_sequences"])
    if hyper.get("vocab"):  # a reused vocabulary is an input: its content, not its path, names the examples
        inputs["vocab_sha256"] = vocab.reuse(hyper["vocab"])[1]["vocab_sha256"]
    return inputs


def is_prepared(data_dir: Path, cache_root: Path, seed: int, hyper: dict) -> bool:
    """Whether this cache has prepared the examples for `hyper` (their manifest is there). Their files are not
    checksummed here: `prepare` does that once, when it reads them (a gigabyte of sha256 at every start, twice,
    otherwise)."""
    return (cache_root / "pretrain" / cache_key(_inputs(data_dir, seed, hyper)) / "manifest.json").is_file()


def prepare(data_dir: Path, cache_root: Path, seed: int, hyper: dict, log=print) -> Prepared:
    """The prepared examples for `hyper` (built now, or read from a verified cache)."""
    from transformers import AutoTokenizer

    inputs = _inputs(data_dir, seed, hyper)
    folder = cache_root / "pretrain" / cache_key(inputs)
    with _building(folder, log):
        meta = _verify(folder)
        if meta is None:
            if folder.exists():
                log(f"the prepared examples in {folder} do not match their manifest: building them again")
            _build(folder, data_dir, seed, hyper, inputs, log)
            meta = _verify(folder)
            if meta is None:
                raise BertevalError(f"the prepared examples in {folder} failed their own checksums right after "
                                    f"writing: is the disk full?")
        else:
            log(f"prepared examples: {folder} (checksums verified)")
    tok = AutoTokenizer.from_pretrained(str(folder / "tokenizer"), local_files_only=True)
    pairs = [tuple(x) for x in json.loads((folder / "heldout_pairs.json").read_text())]
    tiny = _load(folder, "train32") if "train32.npz" in meta.get("files", {}) else None
    return Prepared(folder, tok, _load(folder, "train128"), _load(folder, "train512"), _load(folder, "heldout128"),
                    _load(folder, "heldout512"), pairs, meta["record"], tiny)


@contextlib.contextmanager
def _building(folder: Path, log):
    """Held while the examples are checked or built: the two twins start side by side on a new machine and
    need the same folder; without it both would build it into one temporary folder and each delete the
    other's half. The second waits (the lock dies with its holder) and then reads what the first wrote. The lock
    file sits beside the folder, not in it as `features`' cache lock does: a rebuild deletes and replaces the
    whole folder."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder.with_name(folder.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another run is preparing {folder}: waiting for it, then reading its examples")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _build(folder: Path, data_dir: Path, seed: int, hyper: dict, inputs: dict, log) -> None:
    from .. import nsp_pairs

    t0 = time.perf_counter()
    corpus = wikipedia.load(data_dir, seed, hyper.get("limit_articles"), log=log)
    log(f"{corpus.record['train_articles']:,} training and {len(corpus.heldout):,} held-out articles "
        f"({len(corpus.record['excluded_squad_dev_title'])} dev titles and "
        f"{corpus.record['excluded_nsp_dev_sentence']['articles']} articles with an NSP dev sentence removed)")
    text_lines = [line for a in corpus.train for line in a.lines if sentences.is_text(line)]
    splitter = sentences.train(text_lines[: sentences.TRAIN_LINES])
    sample = text_lines[:: max(1, len(text_lines) // 3000)][:3000]
    splitter.record["agreement_with_pysbd"] = sentences.agreement_with_pysbd(splitter, sample)
    log(f"sentences: {splitter.record['agreement_with_pysbd']}")
    tokenizer, vocab_record = (vocab.reuse(hyper["vocab"]) if hyper.get("vocab") else
                               vocab.train(text_lines, hyper["vocab_size"]))
    log(f"vocabulary: {vocab_record['vocab_size']:,} WordPiece tokens in {vocab_record['train_s']} s")
    docs, doc_stats = tokenize_documents(corpus.train, splitter, tokenizer)
    log(f"training text: {doc_stats}")
    held_docs, held_stats = tokenize_documents(corpus.heldout, splitter, tokenizer)
    parts, recs = [], []
    for k in range(int(hyper.get("short_passes", 1))):  # each pass: fresh cuts, partners and masks
        streams = ("segments", "masking") if k == 0 else (f"segments_pass{k + 1}", f"masking_pass{k + 1}")
        pass_docs = docs if k == 0 else docs.subset(numpy_rng(seed, f"order_pass{k + 1}").permutation(len(docs)))
        seqs, rec = build_sequences(pass_docs, tokenizer, SHORT, seed, streams, hyper["short_seq_prob"])
        parts.append(seqs)
        recs.append(rec)
        audit = rec["cue_audit"]
        log(f"{SHORT}-token sequences, pass {k + 1}: {rec['sequences']:,} ({rec['tokens']:,} tokens); cue audit: "
            f"classifier {audit['classifier_5fold_accuracy']}, strongest single feature "
            f"{audit['strongest_single_feature']} {audit['single_feature_rule_accuracy'][audit['strongest_single_feature']]}")
    train128 = concatenate(parts)
    rec128 = recs[0] if len(recs) == 1 else {"passes": recs, "sequences": len(train128), "tokens": train128.tokens(),
                                             "sha256": sequences_sha256(train128)}
    order = numpy_rng(seed, "long_segments").permutation(len(docs))
    train512, rec512 = build_sequences(docs.subset(order), tokenizer, LONG, seed, ("long_segments", "long_masking"),
                                       hyper["short_seq_prob"], limit=hyper["long_sequences"])
    built = {}
    if hyper.get("tiny_sequences"):
        tiny_order = numpy_rng(seed, "tiny_segments_order").permutation(len(docs))
        built["train32"] = build_sequences(docs.subset(tiny_order), tokenizer, TINY, seed,
                                           ("tiny_segments", "tiny_masking"), hyper["short_seq_prob"],
                                           limit=int(hyper["tiny_sequences"]))
        log(f"{TINY}-token sequences: {built['train32'][1]['sequences']:,}")
    held128, hrec128 = build_sequences(held_docs, tokenizer, SHORT, seed + 1, ("segments", "eval_masking"),
                                       hyper["short_seq_prob"])
    held512, hrec512 = build_sequences(held_docs, tokenizer, LONG, seed + 1, ("long_segments", "eval_masking"),
                                       hyper["short_seq_prob"])
    held_articles = [nsp_pairs.Article(a.title, tuple(x for x in a.lines if sentences.is_text(x)))
                     for a in corpus.heldout]
    held_pairs, pair_stats = nsp_pairs.build_pairs(held_articles, seed)
    record = {"text": corpus.record, "sentences": splitter.record, "vocabulary": vocab_record,
              "documents": {"train": doc_stats, "heldout": held_stats},
              "sequences": {"train128": rec128, "train512": rec512, "heldout128": hrec128, "heldout512": hrec512,
                            **{name: rec for name, (_, rec) in built.items()}},
              "heldout_sentence_pairs": {**pair_stats.as_dict(), "rules": "berteval.pairs (as the NSP dev pairs: "
                                         "pysbd sentences of one paragraph, NotNext from another article)",
                                         "seed": seed},
              "prepare_s": None}
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tokenizer.save_pretrained(str(tmp / "tokenizer"))
    for name, seqs in (("train128", train128), ("train512", train512), ("heldout128", held128),
                       ("heldout512", held512), *((name, seqs) for name, (seqs, _) in built.items())):
        _save(tmp, name, seqs)
    (tmp / "heldout_pairs.json").write_text(json.dumps([[p.a, p.b, p.label] for p in held_pairs]))
    record["prepare_s"] = round(time.perf_counter() - t0, 1)
    files = {str(p.relative_to(tmp)): wikipedia.file_sha256(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
    (tmp / "manifest.json").write_text(json.dumps({"inputs": inputs, "files": files, "record": record}, indent=1))
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)
    log(f"prepared in {record['prepare_s']} s: {folder}")
