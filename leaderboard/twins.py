"""What NSP pre-training changes: the two pre-trained twins side by side, written from the records.

`wiki-bert-mini` (masked LM + next-sentence prediction) and `wiki-bert-mini-nonsp` (masked LM only) saw the
same examples in the same order from the same initialisation (berteval.pretrain.loop), so any difference
between their records of one cell (task x regime x pooling, last layer, main setup) is NSP's doing, up to
seed noise. For each cell both twins hold: each twin's mean and sample std over seeds, and the difference
NSP - no NSP paired by seed (the same seed: the same held-out slice, training order and initialisation of the
head), its mean with a 95% Student-t interval over seeds (berteval.stats.summarise). Like the findings, the
interval measures how much the difference moves between seeds, not the sampling of the dev set.

BERT's own ablation (Devlin et al. 2019, Table 5) and RoBERTa's (Liu et al. 2019, Table 2) are printed beside
it from leaderboard.references, drawn apart: bigger models, pre-trained for far longer, never ranked with
these rows. `python -m leaderboard.twins [FILES...]` prints the Markdown. Pure functions; light (no torch).
"""

from __future__ import annotations

import argparse
import math
import sys

import pandas as pd

from berteval.stats import summarise

from . import data, references
from .findings import points
from .figures.style import fmt, metric_scale
from .labels import metric_name, reading_order, regime_name, task_name
from .overview import markdown_table

NSP, NO_NSP = "berteval/wiki-bert-mini", "berteval/wiki-bert-mini-nonsp"
POOLING_ORDER = ("cls", "pooler", "mean", "max", "bi-mean")  # the question's three first, then the rest

COLUMNS = ["task", "regime", "pooling", "metric", "scale", "n_seeds", "nsp_mean", "nsp_std", "nonsp_mean",
           "nonsp_std", "diff", "diff_low", "diff_high"]


def _pooling_rank(name: str) -> tuple:
    return (POOLING_ORDER.index(name), "") if name in POOLING_ORDER else (len(POOLING_ORDER), name)


def comparison(df: pd.DataFrame) -> pd.DataFrame:
    """One row per task x regime x pooling (last layer, main setup) that both twins hold, in reading order."""
    if df is None or df.empty:
        return pd.DataFrame(columns=COLUMNS)
    main = data.main_setups(df[df["model"].isin([NSP, NO_NSP])])
    main = main[(main["layer"] == -1) & ~data.is_estimate(main)]
    rows = []
    for (task, regime, pooling), g in main.groupby(["task", "regime", "pooling"], sort=False):
        a = g[g["model"] == NSP].groupby("seed")["value"].mean()
        b = g[g["model"] == NO_NSP].groupby("seed")["value"].mean()
        if a.empty or b.empty:
            continue  # one twin only (e.g. the NSP head itself, refused for the twin that never trained it)
        scale = metric_scale(g["value"])
        common = sorted(set(a.index) & set(b.index))
        d = summarise(points(a[s] - b[s], scale) for s in common)
        sa, sb = summarise(a), summarise(b)
        rows.append({"task": task, "regime": regime, "pooling": pooling, "metric": g["main_metric"].iloc[0],
                     "scale": scale, "n_seeds": d.n, "nsp_mean": sa.mean, "nsp_std": sa.std,
                     "nonsp_mean": sb.mean, "nonsp_std": sb.std,
                     # No shared seed: the unpaired difference of the means, without an interval.
                     "diff": d.mean if d.n else points(sa.mean - sb.mean, scale),
                     "diff_low": d.ci95_low, "diff_high": d.ci95_high})
    out = pd.DataFrame(rows, columns=COLUMNS)
    if out.empty:
        return out
    order = reading_order(set(zip(out["task"], out["regime"])), ("task", "regime"))
    out["_g"] = [order.index((t, r)) for t, r in zip(out["task"], out["regime"])]
    out["_p"] = out["pooling"].map(_pooling_rank)
    return out.sort_values(["_g", "_p"], kind="stable").drop(columns=["_g", "_p"]).reset_index(drop=True)


def _interval(row) -> str:
    if row["n_seeds"] > 1 and not math.isnan(row["diff_low"]):
        return f" [95% CI {row['diff_low']:+.1f}, {row['diff_high']:+.1f}]"
    return ""


def _verdict(row) -> str:
    if row["n_seeds"] < 2 or math.isnan(row["diff_low"]):
        return "one seed: no interval"
    if row["diff_low"] > 0:
        return "NSP ahead"
    if row["diff_high"] < 0:
        return "no-NSP ahead"
    return "the interval includes 0"


def sentences(comp: pd.DataFrame) -> list[str]:
    """One sentence per task x regime: each pooling's score with NSP, without, and the paired difference."""
    out = []
    for (task, regime), g in comp.groupby(["task", "regime"], sort=False):
        metric = g["metric"].iloc[0]
        label = "" if metric == "accuracy" else metric_name(metric) + " "
        parts = [f"`{r['pooling']}` {label}{fmt(r['nsp_mean'], r['scale'])} vs {fmt(r['nonsp_mean'], r['scale'])} "
                 f"({r['diff']:+.1f} points{_interval(r)}; {_verdict(r)})" for _, r in g.iterrows()]
        seeds = int(g["n_seeds"].max())
        out.append(f"{task_name(task)}, {regime_name(regime)}, with NSP vs without ({seeds} seed"
                   f"{'s' if seeds != 1 else ''} paired): " + "; ".join(parts) + ".")
    return out


def _published() -> pd.DataFrame:
    """BERT's and RoBERTa's with/without-NSP pairs from the reference table (published, drawn apart)."""
    r = references.references()
    named = r["model"].str.contains("NSP", regex=False)  # RoBERTa's rows and BERT's "No NSP" rows
    bert_table5 = r["citation"].eq(references.DEVLIN) & r["where"].str.contains("Table 5", regex=False)
    return r[named | bert_table5]


def _spread(mean: float, std: float, scale: float, n_seeds: int) -> str:
    """Mean ± std; one seed has no spread, so its value stands alone (a "± 0.0" would claim a spread of zero)."""
    return fmt(mean, scale) if n_seeds < 2 else f"{fmt(mean, scale)} ± {fmt(std, scale)}"


def display(comp: pd.DataFrame) -> pd.DataFrame:
    """What a reader sees of `comparison`: names in words, mean ± std, the difference with its interval."""
    return pd.DataFrame({
        "task": [task_name(t) for t in comp["task"]], "regime": [regime_name(r) for r in comp["regime"]],
        "pooling": list(comp["pooling"]),
        "with NSP": [_spread(m, d, s, n) for m, d, s, n in
                     zip(comp["nsp_mean"], comp["nsp_std"], comp["scale"], comp["n_seeds"])],
        "without NSP": [_spread(m, d, s, n) for m, d, s, n in
                        zip(comp["nonsp_mean"], comp["nonsp_std"], comp["scale"], comp["n_seeds"])],
        "NSP - no NSP (points)": [f"{r['diff']:+.1f}{_interval(r)}" for _, r in comp.iterrows()],
        "seeds": [int(n) for n in comp["n_seeds"]]}, columns=DISPLAY_COLUMNS)


DISPLAY_COLUMNS = ["task", "regime", "pooling", "with NSP", "without NSP", "NSP - no NSP (points)", "seeds"]
CAPTION = "Mean ± sample std over seeds; the difference is paired by seed with its 95% t-interval over seeds."
EMPTY = ("No twin records yet: `berteval/wiki-bert-mini` and `berteval/wiki-bert-mini-nonsp` share no scored cell "
         "(`python -m berteval pretrain`, then `python -m berteval run --model wiki-bert-mini ...` for both).")
PUBLISHED = ("Published, drawn apart (BERT-base and RoBERTa-base, pre-trained for far longer; never ranked with the "
             "rows above):")


def published_lines(tasks=None) -> list[str]:
    """The published with/without-NSP rows, for `tasks` only where given (the tasks the measured rows show).
    The task's name without berteval's protocol note: BERT's QNLI is not berteval's 5-fold estimate."""
    r = _published()
    if tasks is not None:
        r = r[r["task"].isin(list(tasks))]
    return [f"{x['model']}, {task_name(x['task']).split(' (')[0]} {metric_name(x['metric'])}: {x['value']:g} "
            f"({references.source(x['citation'], x['where'])})" for _, x in r.iterrows()]


def as_markdown(df: pd.DataFrame) -> str:
    comp = comparison(df)
    if comp.empty:
        return EMPTY
    shown = display(comp)
    shown["pooling"] = [f"`{p}`" for p in shown["pooling"]]
    published = published_lines(set(comp["task"]))
    return (CAPTION + "\n\n" + markdown_table(shown) + "\n\n" + "\n".join(f"- {s}" for s in sentences(comp))
            + ("\n\n" + PUBLISHED + "\n\n" + "\n".join(f"- {x}" for x in published) if published else "") + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m leaderboard.twins",
                                 description="Print, as Markdown, what NSP pre-training changes per task: the two "
                                             "pre-trained twins' records side by side.")
    ap.add_argument("files", nargs="*", help="record files (.jsonl) or folders; default leaderboard/results/")
    args = ap.parse_args(argv)
    df, problems = data.load(args.files or None)
    for p in problems:
        print(f"skipped {p}", file=sys.stderr)
    print(as_markdown(df))
    return 0


if __name__ == "__main__":
    sys.exit(main())
