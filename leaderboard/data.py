"""Result records -> pandas: one long frame (a row per record) and its per-seed aggregate.

Everything the leaderboard shows starts here. Records are read and validated only by
`berteval.records.read_records`, so the leaderboard can never accept a line the CLI's
`validate` would reject; bad lines come back as `Problem`s (file and line number) and
the rest still load. The long frame keeps every record's provenance (command, versions,
git commit) so any number on screen can be traced to the run that produced it; the
aggregate is what the figures and the table summarise across seeds.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from berteval import markup, record_lookup
from berteval.config import DEFAULT_RESULTS, results_root
from berteval.pooling import POOLINGS
from berteval.records import Problem, RunRecord, read_records
from berteval.regimes import is_kfold
from berteval.stats import summarise

# The committed results; $BERTEVAL_RESULTS points the leaderboard, the app and the CLI elsewhere together.
RESULTS_DIR = DEFAULT_RESULTS

# What identifies a compared cell, and what must also match before seeds are averaged:
# a quick `--limit-train` run, another dtype or other data never averages into a full run.
CELL = ["model", "task", "regime", "pooling", "layer"]
SETUP = ["model_revision", "task_version", "data_short", "n_train", "dtype", "main_metric"]

# Columns every frame has, even an empty one, so filters and figures can rely on them.
COLUMNS = [
    "run_id", "model", "model_revision", "task", "task_version", "split", "pooling", "regime", "layer",
    "layer_label", "seed", "main_metric", "value", "n_train", "n_eval", "data_sha256", "data_short", "dtype",
    "device", "wall_s", "git_commit", "git_short", "command", "versions", "timestamp", "file",
    "pooler_provenance", "metrics", "paired_tests", "reproduce", "kfold_whole",
]
AGG_COLUMNS = [*CELL, "layer_label", *SETUP, "mean", "std", "n_seeds", "seeds", "ci95_low", "ci95_high",
               "ci95_half", "n_eval", "git_commits", "run_ids", "reproduce"]


def record_files(paths: Iterable[str | os.PathLike] | None = None) -> list[Path]:
    """The .jsonl files to read: the results root by default (berteval.config.results_root); a folder stands
    for its .jsonl files."""
    out: list[Path] = []
    for p in ([results_root()] if paths is None else paths):
        p = Path(p)
        # A folder's subfolders hold predictions and heads, not records: only its own *.jsonl count.
        out.extend(sorted(p.glob("*.jsonl")) if p.is_dir() else [p])
    return out


def layer_label(layer: int) -> str:
    # -1 is "whatever the last layer is"; other values are absolute hidden-state indices.
    return "last" if layer == -1 else str(layer)


def pooling_order(names) -> list[str]:
    """Registry order first (cls, pooler, mean, max), then anything else alphabetically: one order
    for every figure and the table, so a pooling sits in the same place everywhere."""
    rank = {n: i for i, n in enumerate(POOLINGS)}
    return sorted(dict.fromkeys(names), key=lambda n: (rank.get(n, len(rank)), n))


def _versions_text(versions: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))


def _row(rec: RunRecord, file: str) -> dict:
    row = {
        "run_id": rec.run_id, "model": rec.model, "model_revision": rec.model_revision, "task": rec.task,
        "task_version": rec.task_version, "split": rec.split, "pooling": rec.pooling, "regime": rec.regime,
        "layer": rec.layer, "layer_label": layer_label(rec.layer), "seed": rec.seed,
        "main_metric": rec.main_metric, "value": rec.main_value, "n_train": rec.n_train, "n_eval": rec.n_eval,
        "data_sha256": rec.data_sha256, "data_short": rec.data_sha256[:12], "dtype": rec.dtype,
        "device": rec.device, "wall_s": float(rec.wall_s), "git_commit": rec.git_commit,
        "git_short": rec.git_commit[:10], "command": str(rec.config.get("command", "")),
        "versions": _versions_text(rec.versions), "timestamp": rec.timestamp, "file": file,
        "reproduce": record_lookup.command(rec),
        # The pooler caveat (e.g. "never trained") matters only where the pooler was read.
        "pooler_provenance": str(rec.config.get("pooler_provenance", "")) if rec.pooling == "pooler" else "",
        "metrics": dict(rec.metrics), "paired_tests": list(rec.paired_tests),
        # A k-fold record that is the whole estimate (every dev example scored once), not one fold's part.
        "kfold_whole": bool(is_kfold(rec.split) and isinstance(rec.config.get("folds"), list)),
    }
    # One column per metric as well, so "f1" and "exact_match" can be sorted and exported.
    row.update({f"metric_{name}": float(v) for name, v in rec.metrics.items()})
    row.update({f"version_{name}": str(v) for name, v in rec.versions.items()})
    # Records may come from a dataset repo: untrusted. No field may form an HTML tag in a figure or a page
    # (berteval.markup.neutral: '<' and '>' become look-alikes; real ids and names never hold them).
    return {k: (v if k == "file" else markup.neutral(v)) for k, v in row.items()}


def frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=None if rows else COLUMNS)
    for col in COLUMNS:
        if col not in df:
            df[col] = pd.Series(dtype=object)
    extra = sorted(c for c in df.columns if c not in COLUMNS)
    return df[COLUMNS + extra].reset_index(drop=True)


REPO_ENV = "BERTEVAL_RESULTS_REPO"  # a Hugging Face dataset repo holding <task>.jsonl and predictions/ (owner/name[@rev])


def snapshot(repo: str) -> Path:
    """The records of a Hugging Face dataset repository, downloaded (or found in the hub cache): the one
    function that reaches the hub. `repo` is `owner/name` or `owner/name@revision`; only the record files
    and their predictions are fetched (leaderboard Spaces keep results in such a repo)."""
    from huggingface_hub import snapshot_download

    repo_id, _, revision = repo.partition("@")
    return Path(snapshot_download(repo_id=repo_id, repo_type="dataset", revision=revision or None,
                                  allow_patterns=["*.jsonl", "predictions/**"]))


def default_paths(repo: str | None = None) -> tuple[list[Path], list[Problem]]:
    """Where records come from when no files are named: the dataset repo (option, else $BERTEVAL_RESULTS_REPO)
    where the hub is reachable, else the results root; a repo that cannot be read is a Problem, not a failure."""
    repo = repo or os.environ.get(REPO_ENV) or None
    if repo:
        try:
            return [snapshot(repo)], []
        except Exception as exc:  # offline, unknown repo, no permission: show the local records and say why
            local = results_root()
            return [local], [Problem(repo, 0, f"cannot read the records of dataset repo {repo} "
                                              f"({type(exc).__name__}: {str(exc)[:200]}); showing {local} instead")]
    return [results_root()], []


def load(paths: Iterable[str | os.PathLike] | None = None,
         repo: str | None = None) -> tuple[pd.DataFrame, list[Problem]]:
    """All valid records as one long frame (a row per record), plus every bad line as a Problem.

    With no `paths`: the records of the dataset repo `repo` (or $BERTEVAL_RESULTS_REPO) where one is named,
    else the results root (see `default_paths`)."""
    rows: list[dict] = []
    problems: list[Problem] = []
    if paths is None:
        paths, problems = default_paths(repo)
    # One file at a time so each row knows which file it came from (read_records does not say).
    for path in record_files(paths):
        recs, bad = read_records([path])
        rows.extend(_row(r, str(path)) for r in recs)
        problems.extend(bad)
    return frame(rows), problems


def _key(value):
    # a missing setup value (NaN) groups with the other missing ones, as groupby(dropna=False) does
    return None if isinstance(value, float) and math.isnan(value) else value


def aggregate(df: pd.DataFrame) -> pd.DataFrame:
    """One row per model x task x regime x pooling x layer (x setup): mean, std and 95% CI across seeds.

    Rows in the order each cell first appears. Grouped in plain Python over column lists: pandas' per-group
    overhead made this 1.7 s for the committed records' 353 cells, and every view aggregates (issue 42)."""
    if df is None or df.empty:
        return pd.DataFrame(columns=AGG_COLUMNS)
    keys = CELL + SETUP
    col = {c: df[c].tolist() for c in [*keys, "value", "seed", "n_eval", "git_short", "run_id", "reproduce"]}
    groups: dict[tuple, list[int]] = {}
    for i, key in enumerate(zip(*(col[c] for c in keys))):
        groups.setdefault(tuple(_key(v) for v in key), []).append(i)
    rows = []
    for key, idx in groups.items():
        s = summarise([col["value"][i] for i in idx])
        by_seed = sorted(idx, key=lambda i: col["seed"][i])
        rows.append({
            **dict(zip(keys, (col[c][idx[0]] for c in keys))),
            "layer_label": layer_label(int(col["layer"][idx[0]])),
            "mean": s.mean, "std": s.std, "n_seeds": s.n,
            "seeds": ", ".join(str(x) for x in sorted(set(col["seed"][i] for i in idx))),
            "ci95_low": s.ci95_low, "ci95_high": s.ci95_high,
            # Student-t intervals are symmetric; one seed has none (NaN, drawn as no bar).
            "ci95_half": (s.ci95_high - s.mean) if not math.isnan(s.ci95_high) else math.nan,
            # Setup columns agree within a group by construction; commits may not (seeds run apart).
            "n_eval": int(max(col["n_eval"][i] for i in idx)),
            "git_commits": ", ".join(dict.fromkeys(str(col["git_short"][i]) for i in idx)),
            # What reproduces the row: the distinct commands that wrote its seeds, and every record id.
            "run_ids": " ".join(col["run_id"][i] for i in by_seed),
            "reproduce": " ; ".join(dict.fromkeys(c for c in (col["reproduce"][i] for i in idx) if c)),
        })
    return pd.DataFrame(rows, columns=AGG_COLUMNS)


def setup_labels(agg: pd.DataFrame) -> pd.Series:
    """A short label for what differs within a model x task x regime (e.g. 'train 2,000'); '' if nothing.

    Works on the long frame and the aggregate alike (both carry the SETUP columns). Most groups
    have one setup, and saying nothing keeps labels short; when a quick run and a full run of the
    same cell coexist, the figures must still tell them apart.
    """
    labels = pd.Series("", index=agg.index, dtype=object)
    if agg.empty:
        return labels
    for _, g in agg.groupby(["model", "task", "regime"], sort=False):
        varying = [c for c in SETUP if g[c].nunique(dropna=False) > 1]
        if not varying:
            continue  # the usual case: one setup, nothing to say (iterating every row took most of this)
        for i, row in g.iterrows():
            parts = []
            for c in varying:
                v = row[c]
                parts.append(f"train {v:,}" if c == "n_train" else f"{c.replace('_short', '')} {v}")
            labels[i] = " · ".join(parts)
    return labels


def pairs(df: pd.DataFrame) -> pd.DataFrame:
    """The paired tests as a long frame: one row per (record, earlier record it was compared with).

    Each record tests itself against earlier records of the same group and seed, so every pair
    appears once; `a` is the later record, `b` the earlier one, counts from a's side.
    """
    cols = ["model", "task", "regime", "seed", "a", "b", "a_pooling", "a_layer", "b_pooling", "b_layer",
            "test", "a_only", "b_only", "p_value", "direction"]
    rows = []
    if df is not None and not df.empty and "paired_tests" in df:
        fields = ["model", "task", "regime", "seed", "pooling", "layer_label", "layer", "paired_tests"]
        # rows as dicts from column lists: iterrows built a Series per record, most of this function's time
        for r in (dict(zip(fields, v)) for v in zip(*(df[c].tolist() for c in fields))):
            for t in r["paired_tests"] or []:
                other = t.get("other") or {}
                if "pooling" not in other or "p_value" not in t:
                    continue  # a malformed entry: nothing to draw, the record itself still shows
                b_layer = int(other.get("layer", -1))
                rows.append({
                    "model": r["model"], "task": r["task"], "regime": r["regime"], "seed": r["seed"],
                    "a": f"{r['pooling']}@{r['layer_label']}", "b": f"{other['pooling']}@{layer_label(b_layer)}",
                    "a_pooling": r["pooling"], "a_layer": r["layer"], "b_pooling": other["pooling"],
                    "b_layer": b_layer, "test": t.get("test", ""), "a_only": t.get("n_only_self_correct"),
                    "b_only": t.get("n_only_other_correct"), "p_value": float(t["p_value"]),
                    # which side is ahead: McNemar's discordant counts, or a bootstrap's observed difference
                    "direction": _direction(t),
                })
    return pd.DataFrame(rows, columns=cols)


def _direction(test: dict) -> int:
    """+1 when the later record (a) is ahead, -1 when the earlier one is, 0 for a tie."""
    if "difference" in test:
        d = float(test["difference"])
    else:
        d = float((test.get("n_only_self_correct") or 0) - (test.get("n_only_other_correct") or 0))
    return int(np.sign(d))


def filter_records(df: pd.DataFrame, **filters) -> pd.DataFrame:
    """Rows whose columns match: each filter is None/''/'all' (any), one value, or a list of values."""
    if df is None:
        return frame([])
    mask = pd.Series(True, index=df.index)
    for col, want in filters.items():
        if want is None or want == "" or want == "all" or col not in df:
            continue
        wanted = [want] if isinstance(want, (str, int)) else list(want)
        if not wanted:
            continue  # an empty multi-select means "no restriction", as in most UIs
        mask &= df[col].astype(str).isin([str(w) for w in wanted])
    return df[mask]


MAIN_FLAG = "main_setup"  # set by cells.mark_main over every ranked record


def main_setups(df: pd.DataFrame) -> pd.DataFrame:
    """Only the main setup of each model x task x regime (trained on the most examples, then the most records):
    what findings, rank bands and paired comparisons read, so a quick `--limit-train` run never competes with a full one."""
    if df is None or df.empty:
        return df
    if MAIN_FLAG in df:  # decided once over every record (cells.mark_main): a filter never moves a cell
        return df[df[MAIN_FLAG].astype(bool).to_numpy()]
    keys = list(zip(*(df[c].tolist() for c in ("model", "task", "regime"))))
    setups = list(zip(*(df[c].tolist() for c in SETUP)))
    best: dict[tuple, tuple] = {}
    for (key, setup), n in Counter(zip(keys, setups)).items():  # first seen wins a tie: stable
        rank = (setup[SETUP.index("n_train")], n)
        if key not in best or rank > best[key][0]:
            best[key] = (rank, setup)
    return df[[best[k][1] == s for k, s in zip(keys, setups)]]


# k-fold estimates (berteval.regimes.kfold: dev questions answered by heads trained on the other dev articles, their
# split "validation, k-fold by article ...") are not official-dev scores: views() shows them apart and never
# ranks them with the records scored on the official dev set.
ESTIMATE_COLUMNS = ["model", "task", "regime", "pooling", "layer", "seed", "split", "n_train", "n_eval", "main_metric",
                    "value", "metrics", "kfold_whole", "wall_s", "run_id"]


def usual_train(rows: pd.DataFrame):
    """The train size most of a task's rows share, or None when they all share one. A row trained on another
    (SQuAD's full train set beside its 17-article subset, a fine-tune on a sample of SST-2) says so wherever
    rows of different regimes are read together (`trained_on`): its score is not the head's doing alone."""
    sizes = rows["n_train"].dropna()
    return None if sizes.nunique() < 2 else sizes.mode().iloc[0]


def trained_on(n_train, usual) -> str:
    """", trained on N examples" for a row whose train size is not the usual one ('' otherwise)."""
    return "" if usual is None or n_train == usual else f", trained on {int(n_train):,} examples"


def is_estimate(df: pd.DataFrame) -> pd.Series:
    """The k-fold rows (a fold, or the estimate with the served head), by their split (the regime registry's rule)."""
    return df["split"].astype(str).map(is_kfold).astype(bool)


def estimates(df: pd.DataFrame) -> pd.DataFrame:
    """The k-fold records, one row each (folds and the estimate), in file order."""
    return df[is_estimate(df)][ESTIMATE_COLUMNS].reset_index(drop=True)
