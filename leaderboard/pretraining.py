"""Pre-training curves of the twins pre-trained here: held-out masked LM and NSP accuracy against tokens seen.

Each twin's evaluations (every `eval_every` steps: masked LM on 1,024 held-out 128-token pairs, the NSP head on
1,024 NSP dev sentence pairs) come from what its run committed: the published `derivation.json`
(`leaderboard/results/encoders/<name>/`) once the run is done, else the run state committed for resuming
(`leaderboard/results/pretrain-resume/<name>/run_state.json`), which says the run is still going and where it
stands. The two models of a pair share their schedule, so their evaluations fall at the same steps and tokens and
are joined row by row: the gap in masked-LM accuracy (NSP twin - control) is what the NSP loss costs or buys the
encoder at that budget. `python -m leaderboard.pretraining [--pair NAME]` prints the Markdown table the findings quote;
`figure()` draws every pair's curves (Plotly). Pure functions of the committed files; light (no torch).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from berteval.models.pretrained import PRETRAINED, RECORD
from berteval.models.twins import TWINS, TwinPair

from .figures.style import fmt

RESULTS = Path(__file__).resolve().parent / "results"
CAPTION = ("Held-out masked-LM accuracy (15% masking, 1,024 held-out 128-token pairs) against training tokens, "
           "from the runs' committed files (a published derivation.json, else the run state committed for "
           "resuming): one colour per pair, the NSP twin solid, its control dashed. Where each run stands")
COLUMNS = ["model", "step", "tokens", "mlm_accuracy", "mlm_loss", "nsp_dev", "nsp_heldout_pairs"]


def source(name: str, results: Path = RESULTS) -> tuple[list[dict], str]:
    """(evaluations, where they come from) for a model pre-trained here: published, in progress, or neither."""
    published = results / "encoders" / name / RECORD
    if published.is_file():
        return json.loads(published.read_text()).get("evaluations", []), "published"
    state = results / "pretrain-resume" / name / "run_state.json"
    if state.is_file():
        rec = json.loads(state.read_text())
        return rec.get("evals", []), f"in progress: step {rec['step']:,}, {rec['tokens'] / 1e6:.2f} M tokens"
    return [], "not started"


def frame(name: str, results: Path = RESULTS) -> pd.DataFrame:
    rows = [{"model": name, "step": e["step"], "tokens": e["tokens"], "mlm_accuracy": e["heldout"]["mlm_accuracy"],
             "mlm_loss": e["heldout"]["mlm_loss"], "nsp_dev": e.get("nsp_dev_pairs", {}).get("nsp_accuracy"),
             "nsp_heldout_pairs": e.get("heldout_sentence_pairs", {}).get("nsp_accuracy")}
            for e in source(name, results)[0]]
    return pd.DataFrame(rows, columns=COLUMNS)


def pretrained_pairs() -> list[TwinPair]:
    """The pairs whose two models are pre-trained here (a derived pair's curves live in its own record)."""
    return [p for p in TWINS.values() if p.nsp in PRETRAINED and p.control in PRETRAINED]


def joined(pair: TwinPair, results: Path = RESULTS) -> pd.DataFrame:
    """One row per evaluation step either model holds: both models' accuracy and loss, the NSP head's accuracy,
    and the masked-LM gap where both have the step."""
    a, b = frame(pair.nsp, results), frame(pair.control, results)
    cols = ["step", "tokens", "mlm_accuracy", "mlm_loss"]
    out = a[cols + ["nsp_dev"]].merge(b[cols], on=["step", "tokens"], how="outer", suffixes=("_nsp", "_control"))
    out["gap"] = out["mlm_accuracy_nsp"] - out["mlm_accuracy_control"]
    return out.sort_values("step").reset_index(drop=True)


def markdown(pair: TwinPair, results: Path = RESULTS) -> str:
    t = joined(pair, results)
    where = {m: source(m, results)[1] for m in (pair.nsp, pair.control)}
    if t.empty:
        return f"**{pair.label}**: no evaluations yet (`{pair.nsp}`: {where[pair.nsp]}; `{pair.control}`: " \
               f"{where[pair.control]})"
    head = (f"**{pair.label}** (`{pair.nsp}`: {where[pair.nsp]}; `{pair.control}`: {where[pair.control]})\n\n"
            "| step | tokens | NSP twin: held-out MLM accuracy / loss | its NSP head on NSP dev pairs | "
            "control: MLM accuracy / loss | gap (NSP - control) |\n|---|---|---|---|---|---|")
    cell = lambda acc, loss: "" if pd.isna(acc) else f"{acc:.3f} / {loss:.3f}"  # noqa: E731
    rows = [f"| {int(r.step):,} | {r.tokens / 1e6:.2f} M | {cell(r.mlm_accuracy_nsp, r.mlm_loss_nsp)} | "
            f"{'' if pd.isna(r.nsp_dev) else fmt(r.nsp_dev, 3)} | {cell(r.mlm_accuracy_control, r.mlm_loss_control)} | "
            f"{'' if pd.isna(r.gap) else f'{round(r.gap, 3) + 0.0:+.3f}'} |" for r in t.itertuples()]
    return "\n".join([head, *rows])


def figure(results: Path = RESULTS):
    """Held-out masked-LM accuracy against tokens (millions) for every model of every pair pre-trained here:
    one colour per pair, the NSP twin solid and its control dashed."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for k, pair in enumerate(pretrained_pairs()):
        for name, dash in ((pair.nsp, "solid"), (pair.control, "dash")):
            f = frame(name, results)
            if f.empty:
                continue
            fig.add_trace(go.Scatter(x=f["tokens"] / 1e6, y=f["mlm_accuracy"], mode="lines+markers", name=name,
                                     line={"dash": dash, "color": _COLOURS[k % len(_COLOURS)]},
                                     hovertemplate="%{x:.2f} M tokens: %{y:.3f}<extra>" + name + "</extra>"))
    fig.update_layout(title="Pre-training: held-out masked-LM accuracy (15% masking, 1,024 128-token pairs)",
                      xaxis_title="training tokens (millions)", yaxis_title="masked-LM accuracy",
                      template="plotly_white", legend={"orientation": "h", "y": -0.25})
    return fig


_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m leaderboard.pretraining", description=__doc__.split("\n\n")[0])
    ap.add_argument("--pair", action="append", choices=[p.name for p in pretrained_pairs()],
                    help="a pair of twins pre-trained here (default: every one); repeat for several")
    ap.add_argument("--results", default=str(RESULTS), help="the results folder (default: the committed one)")
    args = ap.parse_args(argv)
    chosen = [TWINS[n] for n in args.pair] if args.pair else pretrained_pairs()
    print("\n\n".join(markdown(p, Path(args.results)) for p in chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
