"""What NSP pre-training changes: every pair of twins side by side, and the pre-training seed spread, from the records.

A pair of twins (berteval.models.twins.TWINS, the one registry of them) is a model trained with next-sentence
prediction and its control, trained identically without the NSP loss: the same start, examples, order and steps,
so any difference between their records of one cell (task x regime x pooling, last layer, main setup) is NSP's
doing, up to seed noise. Per pair, for each cell both models hold: each model's mean and sample std over seeds,
and the difference NSP - no NSP paired by seed (the same seed: the same held-out slice, training order and
initialisation of the head), its mean with a 95% Student-t interval over seeds (berteval.stats.summarise). Like
the findings, that interval measures how much the difference moves between the heads' seeds, with the
pre-training run held fixed, not the sampling of the dev set. Each pair is headed by its label (generation,
pre-training seed, token budget) and its caveat, said once (the first generation's NSP learned a punctuation cue).

The seed spread. The heads' seeds cannot show how much a difference owes to the one pre-training run behind it,
so a pair trained with another pre-training seed (`spread_against`: the seed-1 pair) is compared, cell by cell,
with the pair of seed 0 at the same token budget (the main pair's 50 M-token snapshot). Their two differences
d0 and d1 disagree by |d0 - d1|: the seed spread of that cell. A main-pair difference d (its full budget, the
figure the findings quote) is *beyond the seed spread* when
  1. its 95% interval over the heads' seeds excludes 0 (it is not the heads' seed noise), and
  2. |d| > |d0 - d1| (it is larger than the disagreement of two pre-training seeds on the same cell).
Why this rule: two pre-training seeds are all there is, and two draws give no interval of their own; |d0 - d1| is
the whole range they span (sqrt 2 times their sample std), so a difference larger than that range would survive
swapping one pre-training seed for the other. It is a screen, not a test, and it assumes the spread measured at
~50 M tokens (the only budget both seeds reach) does not grow with training. A cell the main pair does not hold,
or holds with one seed, is not judged.

BERT's own ablation (Devlin et al. 2019, Table 5) and RoBERTa's (Liu et al. 2019, Table 2) are printed beside
them from leaderboard.references, drawn apart: bigger models, pre-trained for far longer, never ranked with these
rows. `python -m leaderboard.twins [--pair NAME] [FILES...]` prints the Markdown. Pure functions; light (no torch).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field

import pandas as pd

from berteval.models.twins import TWINS, TwinPair, spread_pairs
from berteval.stats import summarise

from . import data, references
from .findings import points
from .figures.style import fmt, metric_scale
from .labels import metric_name, reading_order, regime_name, task_name
from .overview import markdown_table

POOLING_ORDER = ("cls", "pooler", "mean", "max", "bi-mean")  # the question's three first, then the rest
KEYS = ["task", "regime", "pooling"]
COLUMNS = ["task", "regime", "pooling", "metric", "scale", "n_seeds", "nsp_mean", "nsp_std", "nonsp_mean",
           "nonsp_std", "diff", "diff_low", "diff_high"]
SPREAD_COLUMNS = ["task", "regime", "pooling", "metric", "diff_ref", "diff_other", "spread", "main_diff", "main_low",
                  "main_high", "main_n", "exceeds"]


def _pooling_rank(name: str) -> tuple:
    return (POOLING_ORDER.index(name), "") if name in POOLING_ORDER else (len(POOLING_ORDER), name)


def pair_of(pair: str | TwinPair) -> TwinPair:
    """A pair from its short name (or the pair itself)."""
    return pair if isinstance(pair, TwinPair) else TWINS[pair]


def comparison(df: pd.DataFrame, pair: str | TwinPair) -> pd.DataFrame:
    """One row per task x regime x pooling (last layer, main setup) that both models of `pair` hold, in reading
    order; empty (with the columns) when they share no cell."""
    nsp, control = pair_of(pair).models
    if df is None or df.empty:
        return pd.DataFrame(columns=COLUMNS)
    main = data.main_setups(df[df["model"].isin([nsp, control])])
    if main.empty:
        return pd.DataFrame(columns=COLUMNS)
    main = main[(main["layer"] == -1) & ~data.is_estimate(main)]
    rows = []
    for (task, regime, pooling), g in main.groupby(KEYS, sort=False):
        a = g[g["model"] == nsp].groupby("seed")["value"].mean()
        b = g[g["model"] == control].groupby("seed")["value"].mean()
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


def exceeds_spread(diff: float, low: float, high: float, spread: float) -> bool | None:
    """The module's rule: the interval [low, high] excludes 0 and |diff| > spread. None: not judged (no interval,
    i.e. one seed or no record, or no spread)."""
    if any(x is None or math.isnan(x) for x in (diff, low, high, spread)):
        return None
    return bool((low > 0 or high < 0) and abs(diff) > spread)


def seed_spread(df: pd.DataFrame, other: str | TwinPair, ref: str | TwinPair, main: str | TwinPair) -> pd.DataFrame:
    """For each cell both `ref` (seed 0 at a budget) and `other` (another seed at that budget) hold: their two
    differences, the spread |diff_ref - diff_other|, the `main` pair's difference with its interval where it holds
    the cell (NaN where not), and whether that difference is beyond the spread (`exceeds_spread`; None: not
    judged). Reading order of `ref`'s comparison."""
    a, b = comparison(df, ref), comparison(df, other)
    if a.empty or b.empty:
        return pd.DataFrame(columns=SPREAD_COLUMNS)
    both = a[[*KEYS, "metric", "diff"]].rename(columns={"diff": "diff_ref"}).merge(
        b[[*KEYS, "diff"]].rename(columns={"diff": "diff_other"}), on=KEYS, how="inner")
    if both.empty:
        return pd.DataFrame(columns=SPREAD_COLUMNS)
    m = comparison(df, main)[[*KEYS, "diff", "diff_low", "diff_high", "n_seeds"]].rename(
        columns={"diff": "main_diff", "diff_low": "main_low", "diff_high": "main_high", "n_seeds": "main_n"})
    out = both.merge(m, on=KEYS, how="left")
    out["spread"] = (out["diff_ref"] - out["diff_other"]).abs()
    out["main_n"] = out["main_n"].fillna(0).astype(int)
    out["exceeds"] = [exceeds_spread(*(float(v) for v in vals)) for vals in
                      zip(out["main_diff"], out["main_low"], out["main_high"], out["spread"])]
    return out[SPREAD_COLUMNS].reset_index(drop=True)


@dataclass
class Spread:
    other: TwinPair  # another pre-training seed (seed 1)
    ref: TwinPair  # seed 0 at the same budget (the main pair's snapshot)
    main: TwinPair  # the pair whose differences the spread judges
    frame: pd.DataFrame


@dataclass
class View:
    """Everything the Markdown and the report show: the pairs in registry order with their comparisons, the seed
    spreads of the pairs shown, and the pairs left out for want of records."""
    pairs: list[tuple[TwinPair, pd.DataFrame]] = field(default_factory=list)
    spreads: list[Spread] = field(default_factory=list)
    without_records: list[TwinPair] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return all(comp.empty for _, comp in self.pairs)

    @property
    def tasks(self) -> set:
        return {t for _, comp in self.pairs for t in comp["task"]}


def view(df: pd.DataFrame, pairs=None) -> View:
    """`pairs` (short names, in the order given) each shown, an empty one included; None: every registered pair
    that has records, in registry order, the others listed as without records. A pair's seed spread is shown with
    the pair of the other seed."""
    chosen = [pair_of(p) for p in pairs] if pairs else list(TWINS.values())
    out = View()
    for pair in chosen:
        comp = comparison(df, pair)
        if comp.empty and not pairs:
            out.without_records.append(pair)
        else:
            out.pairs.append((pair, comp))
    shown = {p.name for p, _ in out.pairs}
    out.spreads = [Spread(o, r, m, seed_spread(df, o, r, m)) for o, r, m in spread_pairs() if o.name in shown]
    return out


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


def heading(pair: TwinPair) -> str:
    return f"{pair.name}: `{pair.nsp}` (with NSP) vs `{pair.control}` (without)"


def caption(pair: TwinPair) -> str:
    """What the pair is, and its caveat: said once, above its table."""
    return pair.label[:1].upper() + pair.label[1:] + "." + (f" {pair.caveat}" if pair.caveat else "")


def no_records(pair: TwinPair) -> str:
    """The honest line for a pair without a shared cell."""
    return (f"No records of this pair yet: `{pair.nsp}` and `{pair.control}` share no scored cell "
            f"(`python -m berteval run --model {pair.nsp} ...`, then the same for `{pair.control}`).")


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


def _spread_verdict(row) -> str:
    if row["main_n"] == 0:
        return "not judged: the main pair has no record of this cell"
    if pd.isna(row["exceeds"]):
        return "not judged: one seed, no interval"
    if row["exceeds"]:
        return "yes"
    if row["main_low"] <= 0 <= row["main_high"]:
        return "no: its interval includes 0"
    return "no: within the seed spread"


def spread_display(s: Spread) -> pd.DataFrame:
    """What a reader sees of `seed_spread`: the two seeds' differences, the spread, the main difference, verdict."""
    f = s.frame
    main = [("not run" if n == 0 else f"{d:+.1f}" + (f" [95% CI {lo:+.1f}, {hi:+.1f}]" if n > 1 else ""))
            for d, lo, hi, n in zip(f["main_diff"], f["main_low"], f["main_high"], f["main_n"])]
    return pd.DataFrame({
        "task": [task_name(t) for t in f["task"]], "regime": [regime_name(r) for r in f["regime"]],
        "pooling": list(f["pooling"]),
        f"{s.ref.name} (seed {s.ref.seed})": [f"{x:+.1f}" for x in f["diff_ref"]],
        f"{s.other.name} (seed {s.other.seed})": [f"{x:+.1f}" for x in f["diff_other"]],
        "seed spread": [f"{x:.1f}" for x in f["spread"]],
        f"{s.main.name} (NSP - no NSP)": main,
        "beyond the spread?": [_spread_verdict(r) for _, r in f.iterrows()]})


def spread_heading(s: Spread) -> str:
    return f"Seed spread: {s.other.name} against {s.ref.name}, judging {s.main.name}"


def spread_no_cells(s: Spread) -> str:
    return (f"No cell both `{s.ref.name}` and `{s.other.name}` hold yet: the seed spread needs NSP - no NSP of the "
            "same cell in both.")


DISPLAY_COLUMNS = ["task", "regime", "pooling", "with NSP", "without NSP", "NSP - no NSP (points)", "seeds"]
CAPTION = ("Each pair: a model trained with next-sentence prediction against its control, trained identically "
           "without it. Mean ± sample std over seeds; the difference is paired by seed with its 95% t-interval "
           "over seeds.")
SPREAD_CAPTION = ("NSP - no NSP (points) of one cell in two pre-training seeds at the same token budget; the seed "
                  "spread is how far the two disagree, |a - b|. The main pair's difference is beyond the spread when "
                  "its 95% interval over seeds excludes 0 and its size exceeds the spread (two pre-training seeds "
                  "give no interval of their own; the spread is measured at the budget both seeds reach).")
EMPTY = ("No twin records yet: no registered pair of twins (berteval.models.twins) shares a scored cell "
         "(`python -m berteval pretrain NAME`, or `python -m berteval derive default+VARIANT` for a derived pair, "
         "then `python -m berteval run --model NAME ...` for both models of the pair).")
PUBLISHED = ("Published, drawn apart (BERT-base and RoBERTa-base, pre-trained for far longer; never ranked with the "
             "rows above):")


def without_records_line(pairs: list[TwinPair]) -> str:
    return "No records yet: " + "; ".join(
        f"{p.name} (`{p.nsp}` vs `{p.control}`)"
        for p in pairs) + "."


def published_lines(tasks=None) -> list[str]:
    """The published with/without-NSP rows, for `tasks` only where given (the tasks the measured rows show).
    The task's name without berteval's protocol note: BERT's QNLI is not berteval's 5-fold estimate."""
    r = _published()
    if tasks is not None:
        r = r[r["task"].isin(list(tasks))]
    return [f"{x['model']}, {task_name(x['task']).split(' (')[0]} {metric_name(x['metric'])}: {x['value']:g} "
            f"({references.source(x['citation'], x['where'])})" for _, x in r.iterrows()]


def _pair_markdown(pair: TwinPair, comp: pd.DataFrame) -> str:
    head = f"#### {heading(pair)}\n\n{caption(pair)}\n\n"
    if comp.empty:
        return head + no_records(pair)
    shown = display(comp)
    shown["pooling"] = [f"`{p}`" for p in shown["pooling"]]
    return head + markdown_table(shown) + "\n\n" + "\n".join(f"- {s}" for s in sentences(comp))


def _spread_markdown(s: Spread) -> str:
    head = f"#### {spread_heading(s)}\n\n"
    if s.frame.empty:
        return head + spread_no_cells(s)
    shown = spread_display(s)
    shown["pooling"] = [f"`{p}`" for p in shown["pooling"]]
    return head + SPREAD_CAPTION + "\n\n" + markdown_table(shown)


def as_markdown(df: pd.DataFrame, pairs=None) -> str:
    """Every pair with records (or the `pairs` named, each shown even without records), their seed spreads, the
    pairs without records in one line, and the published pairs apart."""
    v = view(df, pairs)
    if v.empty and not pairs:
        return EMPTY
    parts = [CAPTION, *(_pair_markdown(p, c) for p, c in v.pairs), *(_spread_markdown(s) for s in v.spreads)]
    if v.without_records:
        parts.append(without_records_line(v.without_records))
    published = published_lines(v.tasks) if v.tasks else []
    if published:
        parts.append(PUBLISHED + "\n\n" + "\n".join(f"- {x}" for x in published))
    return "\n\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m leaderboard.twins",
                                 description="Print, as Markdown, what NSP pre-training changes per task: each pair "
                                             "of twins' records side by side, and the pre-training seed spread.")
    ap.add_argument("files", nargs="*", help="record files (.jsonl) or folders; default leaderboard/results/")
    ap.add_argument("--pair", action="append", choices=list(TWINS), metavar="NAME",
                    help="a pair of twins (repeatable): " + ", ".join(TWINS) + "; default: every pair with records")
    args = ap.parse_args(argv)
    df, problems = data.load(args.files or None)
    for p in problems:
        print(f"skipped {p}", file=sys.stderr)
    print(as_markdown(df, args.pair))
    return 0


if __name__ == "__main__":
    sys.exit(main())
