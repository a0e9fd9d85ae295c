"""The examples behind the paired tests, for the app's leaderboard tab and the report.

`berteval.disagree.compare` does the work (the same code as `python -m berteval disagree`); this
module picks the records from the leaderboard's frame, turns the result into a table, and writes
the report's section: for every pair of last-layer heads McNemar-tested on the same examples (main
setup, lowest seed), one line with the counts and the few examples each head gets right that the
other gets wrong, most confidently wrong first; every disagreeing example goes to a CSV file beside
the report (`report_rows`). Predictions are read beside each record's file
(`predictions/<task>/<run_id>.json`), so records from a downloaded snapshot work the same as the
committed ones. Texts need the data: `--data-dir` / $BERTEVAL_DATA for the report, and for the app
`texts_dir()`, which finds it as the docs' commands do (../shared/data beside the clone), else
(`hub=True`, the app on a Space) the Hugging Face Hub through the task's own loader, the same
`datasets` path the quick probe takes without local data (`hub_split`). Without any of them ids and
labels still show. In the app (`visitor=True`) a message never names a command-line option. Never
raises.
"""

from __future__ import annotations

import functools
import html
import logging
import os
import re
import threading
import time
from pathlib import Path

import pandas as pd

from berteval import disagree
from berteval.errors import BertevalError
from berteval.record_lookup import short_name
from berteval.records import read_records

from . import data
from .labels import reading_order, regime_name, task_name

COLUMNS = ["right", "id", "gold", "head A", "head B", "text"]
EMPTY = pd.DataFrame(columns=COLUMNS)
CSV_COLUMNS = ["task", "model", "regime", "seed", "head_a", "head_b", "right", "id", "gold", "a_says", "b_says",
               "text"]
# Where the docs keep the data: ../shared/data beside the clone (the repository's parent folder).
SHARED_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
NO_TEXTS = "Texts not shown: the data these examples come from is not on this server."
TEXT_CHARS = 140  # a text in the report's summary table; the CSV keeps it whole


def texts_dir() -> Path | None:
    """The data folder behind the examples' texts, found as the docs' commands find it: $BERTEVAL_DATA, else
    ../shared/data beside the clone; None where neither is a folder."""
    raw = os.environ.get("BERTEVAL_DATA")
    for candidate in ([Path(raw).expanduser()] if raw else []) + [SHARED_DATA]:
        if candidate.is_dir():
            return candidate
    return None


# A hub that did not answer (offline, or the dataset not in the local cache) is asked again only after this long:
# every click of the viewer would otherwise pay for the attempt.
HUB_RETRY_S = 300.0
_HUB_FAILED: dict[str, float] = {}  # task -> when its hub read last failed (time.monotonic())
_HUB_LOCK = threading.Lock()
FROM_HUB = "Texts read from the Hugging Face Hub (this server has no local copy of the data)."


@functools.lru_cache(maxsize=8)
def _hub_eval(task: str):
    from berteval.tasks import get

    return get(task).load(None).eval  # None: the hub, through `datasets` (tasks.base.hub_dataset)


def hub_split(task: str):
    """The task's evaluation split from the Hugging Face Hub, read by the task's own loader with no data dir (as
    the quick probe reads SST-2 on a server without the data), kept for the process; None where the hub (or the
    local datasets cache) cannot give it, and then not asked again for HUB_RETRY_S."""
    with _HUB_LOCK:
        failed = _HUB_FAILED.get(task)
        if failed is not None and time.monotonic() - failed < HUB_RETRY_S:
            return None
        try:
            return _hub_eval(task)
        except Exception:  # noqa: BLE001: BertevalError offline; datasets and the hub client raise many types
            _HUB_FAILED[task] = time.monotonic()
            return None


def _for_visitor(message: str) -> str:
    """A note or refusal of berteval.disagree in words for a page visitor: what is missing on this server, not
    which option a shell user would pass."""
    text = str(message)
    if "different data" in text or "not what these records were scored on" in text:
        return "Texts not shown: the data on this server is not the data these records were scored on."
    if "SQuAD answers are right or wrong only against the gold answers" in text:
        return ("SQuAD answers are right or wrong only against the gold answers, and the SQuAD dev set is not on "
                "this server: no disagreements to show.")
    if "--data-dir" in text or "BERTEVAL_DATA" in text or "data dir" in text:
        return NO_TEXTS
    return text


def heads(df: pd.DataFrame, task, model, regime, seed) -> list[str]:
    """The heads (pooling@layer) one run has, for the two pickers."""
    if df is None or df.empty:
        return []
    g = data.filter_records(df, task=task, model=model, regime=regime)
    if seed not in (None, "", "all"):
        g = g[g["seed"].astype(str) == str(seed)]
    return sorted({_head(p, lay) for p, lay in zip(g["pooling"], g["layer"])},
                  key=lambda h: (h.split("@")[1] if "@" in h else "", h))


def _head(pooling: str, layer: int) -> str:
    return pooling if int(layer) == -1 else f"{pooling}@{int(layer)}"


def _record(df: pd.DataFrame, task, model, regime, seed, head: str):
    pooling, layer = disagree.parse_head(head)
    rows = df[(df["task"] == task) & (df["model"] == model) & (df["regime"] == regime)
              & (df["seed"].astype(str) == str(seed)) & (df["pooling"] == pooling) & (df["layer"] == layer)]
    if rows.empty:
        raise BertevalError(f"no record of {head} for {short_name(model)} {task} {regime} seed {seed}")
    rows = data.main_setups(rows)
    file = rows.iloc[0]["file"]
    return _records_of(file)[rows.iloc[0]["run_id"]], Path(file).parent


def _records_of(file: str) -> dict:
    """{run_id: RunRecord} of one record file, read once per version of it: the report compares hundreds of pairs,
    and reading and validating sst2.jsonl again for each of their heads was most of its 3 minutes (issue 42)."""
    st = os.stat(file)
    return _read_file(str(file), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _read_file(file: str, size: int, mtime_ns: int) -> dict:
    recs, _ = read_records([file])
    return {r.run_id: r for r in recs}


def _regression(task: str) -> bool:
    from berteval.tasks import TASKS

    return task in TASKS and TASKS[task].regression


def _compare(df: pd.DataFrame, task, model, regime, seed, head_a: str, head_b: str, data_dir=None, split=None):
    a, root = _record(df, task, model, regime, seed, head_a)
    b, _ = _record(df, task, model, regime, seed, head_b)
    return disagree.compare(task, a, b, root=root, data_dir=data_dir, split=split)


def view(df: pd.DataFrame, task, model, regime, seed, head_a: str, head_b: str, data_dir=None,
         limit: int | None = 50, visitor: bool = False, hub: bool = False) -> tuple[str, pd.DataFrame]:
    """(a Markdown summary, a table of disagreeing examples) for two heads of one run; a message on any problem.
    `visitor`: the app's words (what this server lacks), not the CLI's (which option to pass). `hub`: with no
    `data_dir` (nor $BERTEVAL_DATA), read the texts from the Hugging Face Hub (`hub_split`)."""
    words = _for_visitor if visitor else (lambda m: m)
    split = None
    try:
        if not all(x not in (None, "", "all") for x in (task, model, regime, seed, head_a, head_b)):
            return "Pick a task, model, regime and seed (the filters above), then two heads.", EMPTY
        if head_a == head_b:
            return "Pick two different heads.", EMPTY
        if _regression(task):
            return (f"{task_name(task)} scores similarity on a scale: a prediction is nearer or further, never right "
                    f"or wrong, so there are no disagreements to list (its paired test is a bootstrap of the "
                    f"correlation)."), EMPTY
        if hub and data_dir is None:
            split = hub_split(task)
        d = _compare(df, task, model, regime, seed, head_a, head_b, data_dir, split)
    except BertevalError as exc:
        return f"⚠️ {words(str(exc))}", EMPTY
    except Exception as exc:  # noqa: BLE001: a view never raises into the UI
        if visitor:  # a page's caller gets no exception text (issue 42): the log keeps it
            logging.getLogger("berteval.app").exception("disagreement view failed")
            return "⚠️ These heads could not be compared (the server log has the reason).", EMPTY
        return f"⚠️ could not compare these heads: {type(exc).__name__}: {exc}", EMPTY
    counts = d.mcnemar_counts()
    summary = f"**{d.header()}** ({task_name(task)}, {regime_name(regime)}, {short_name(model)}, seed {seed}, " \
              f"{d.n_eval:,} examples)."
    if counts is not None:
        summary += f" The records' McNemar test counted {counts[0]} and {counts[1]}."
    if limit is not None and d.n > 2 * limit:
        summary += f" Showing the {limit} most confidently wrong of each kind."
    if d.note:
        summary += f"\n\n{words(d.note).rstrip('.')}."
    elif split is not None:
        summary += f"\n\n{FROM_HUB}"
    rows = [{"right": d.name_a if e in d.a_only else d.name_b, "id": e.id, "gold": e.gold,
             "head A": disagree._pred(e.pred_a, e.conf_a), "head B": disagree._pred(e.pred_b, e.conf_b),
             "text": e.text or ""} for e in d.examples(limit)]
    return summary, pd.DataFrame(rows, columns=COLUMNS).rename(
        columns={"head A": f"{d.name_a} says", "head B": f"{d.name_b} says"})


def _tested_pairs(df: pd.DataFrame) -> pd.DataFrame:
    """The McNemar-tested pairs of last-layer heads, main setup, lowest seed of each model, task and regime."""
    main = data.main_setups(df)
    main = main[main["layer"] == -1]
    p = data.pairs(main)
    if p.empty:
        return p
    p = p[(p["a_layer"] == -1) & (p["b_layer"] == -1) & (p["test"] == "mcnemar_exact")]
    lowest = p.groupby(["task", "model", "regime"])["seed"].transform("min")
    return p[p["seed"] == lowest]


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1].rstrip() + "…"


def _example_html(d, e) -> str:
    says = f"{d.name_a}: {disagree._pred(e.pred_a, e.conf_a)}, {d.name_b}: {disagree._pred(e.pred_b, e.conf_b)}"
    text = f" “{html.escape(_short(e.text))}”" if e.text else ""
    return f"<div><code>{html.escape(str(e.id))}</code> gold {html.escape(str(e.gold))} ({html.escape(says)}){text}</div>"


def csv_name(task: str, model: str, regime: str) -> str:
    """The file name of one group's disagreements: `disagreements-sst2-all-MiniLM-L6-v2-probe.csv`."""
    return "disagreements-" + re.sub(r"[^A-Za-z0-9.+-]+", "_", f"{task}-{short_name(model)}-{regime}") + ".csv"


def report_section(df: pd.DataFrame, data_dir=None, per_kind: int = 2, href=None
                   ) -> tuple[str, dict[str, pd.DataFrame]]:
    """(the report's HTML, {file name: every disagreeing example of one model, task and regime}): for each
    McNemar-tested pair of last-layer heads (main setup, lowest seed) one table row with the counts and the
    `per_kind` examples each head gets right that the other gets wrong, most confidently wrong first. `href(name)`:
    where the page links a group's file (the caller writes them; None: no links, as in a one-file report)."""
    files: dict[str, pd.DataFrame] = {}
    if df is None or df.empty:
        return "<p>No records.</p>", files
    p = _tested_pairs(df)
    if p.empty:
        return "<p>No paired tests in these records.</p>", files
    main = data.main_setups(df)
    out, no_text = [], False
    groups = {key: g for key, g in p.groupby(["task", "model", "regime"])}
    for task, model, regime in reading_order(groups):
        g = groups[(task, model, regime)]
        seed = int(g["seed"].iloc[0])
        body, rows = [], []
        # this run's records, selected once: filtering the whole frame per head was a third of the section's time
        run = main[(main["task"] == task) & (main["model"] == model) & (main["regime"] == regime)
                   & (main["seed"] == seed)]
        for r in g.itertuples():
            try:
                d = _compare(run, task, model, regime, seed, r.a_pooling, r.b_pooling, data_dir)
            except Exception as exc:  # noqa: BLE001: one pair that cannot be compared says so; the rest show
                body.append(f"<tr><td><code>{html.escape(r.a_pooling)}</code> vs <code>{html.escape(r.b_pooling)}"
                            f"</code></td><td colspan=3>{html.escape(f'{type(exc).__name__}: {exc}')}</td></tr>")
                continue
            no_text = no_text or any(e.text is None for e in d.a_only + d.b_only)
            # By identity: `e in d.a_only` compares dataclasses field by field, 65 million times for the
            # committed records (57 of the report's 84 s, issue 42).
            a_right = {id(x) for x in d.a_only}
            for e in (d.examples() if href is not None else ()):  # every example only where a file will hold it
                rows.append({"task": task, "model": short_name(model), "regime": regime, "seed": seed, "head_a": d.name_a,
                             "head_b": d.name_b, "right": d.name_a if id(e) in a_right else d.name_b, "id": e.id,
                             "gold": e.gold, "a_says": disagree._pred(e.pred_a, e.conf_a),
                             "b_says": disagree._pred(e.pred_b, e.conf_b), "text": e.text or ""})
            top = d.examples(per_kind)
            a_top = "".join(_example_html(d, e) for e in top if id(e) in a_right)
            b_top = "".join(_example_html(d, e) for e in top if id(e) not in a_right)
            body.append(f"<tr><td><code>{html.escape(d.name_a)}</code> vs <code>{html.escape(d.name_b)}</code></td>"
                        f'<td class="num">{d.n:,}: {len(d.a_only):,} / {len(d.b_only):,}</td>'
                        f"<td>{a_top or '—'}</td><td>{b_top or '—'}</td></tr>")
        link = ""
        if rows and href is not None:
            name = csv_name(task, model, regime)
            files[name] = pd.DataFrame(rows, columns=CSV_COLUMNS)
            link = (f' <small><a download href="{html.escape(href(name))}">all {len(rows):,} disagreeing examples '
                    f"(CSV)</a></small>")
        out.append(f"<h3>{html.escape(task_name(task))} · {html.escape(regime_name(regime))} · "
                   f"{html.escape(short_name(model))} (seed {seed}){link}</h3>"
                   '<div class="scroll box short"><table class="examples"><thead><tr><th>pair (A vs B)</th>'
                   "<th>disagreements: A right / B right</th><th>A right, B wrong: most confidently wrong first</th>"
                   f"<th>B right, A wrong</th></tr></thead><tbody>{''.join(body)}</tbody></table></div>")
    note = ("<p><i>Texts are not shown: this report was written without a data dir (<code>python -m leaderboard "
            "--data-dir ../shared/data</code> or <code>BERTEVAL_DATA</code> adds them).</i></p>" if no_text else "")
    total = sum(len(f) for f in files.values())
    link = (f"<p>Every disagreeing example of these pairs ({total:,}, with its text where the data was given) is in "
            f"a CSV file per model, task and regime, linked from its heading.</p>" if files else "")
    return note + link + "".join(out), files


def report_html(df: pd.DataFrame, data_dir=None, per_kind: int = 2) -> str:
    """The report's section alone (no CSV written): see `report_section`."""
    return report_section(df, data_dir, per_kind)[0]
