"""The HTML report: one file that answers each task on its first screen, every detail one click away.

Its first screen is the answer to the question the project asks (which vector should a head read?): one row per
task, the best head measured and the three vectors on the reference encoder (all-MiniLM-L6-v2, `--model default`),
with what the paired tests say (overview.py). Everything else is a closed `<details>` section, opened on demand:
each task's models x poolings view, the findings in full, the twins, models side by side, every figure, rank bands,
the table, the k-fold estimates apart, the examples behind the paired tests (a few per pair) and the provenance.
The numbers come from the same cells as the app's (cells.py).

The page is one self-contained file (packing.py): Plotly's JavaScript, the figures and the CSV downloads are gzip'd
inside it and unpacked by the browser when first needed, so it opens offline, writes nothing beside itself (the
folder beside it used to dirty the clone) and stays under 3 MB. `with_files` (`--with-files`) also writes every
disagreeing example and every record as CSV files in `<name>_files/` beside it. A few lines of inline JavaScript
make the tables sortable and searchable. Every string from a record is HTML-escaped, because records are data
written by other processes, not markup.
"""

from __future__ import annotations

import datetime as _dt
import html
import os
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import pandas as pd

from berteval.record_lookup import short_name
from berteval.records import Problem
from berteval.store import write_atomic

from . import (bands, cells, data, disagreements, figures, findings, overview, packing, pretraining, references,
               table, twins)
from .board import FIGURE_FUNCTIONS
from .figures import compare, curves


CAPTIONS = {
    "ablation": ("Pooling ablation",
                 "Diamonds: mean over seeds of the task's main metric at the last layer; whiskers: 95% "
                 "Student-t interval across seeds (none for a single seed); open circles: the individual "
                 "seeds. Each task has its own panel and y axis, because metrics differ in scale."),
    "layers": ("Which layer to read",
               "The same probe on inner hidden states: layer indices count from the embeddings (0); "
               "'last' is the final layer. Whiskers: 95% interval across seeds."),
    "heatmap": ("Task × pooling",
                "Cell text: mean ± std across seeds at the last layer. Colour ranks the poolings within "
                "each task row (scales differ between tasks), so compare colours along a row, not down a column."),
    "significance": ("Do the differences hold up?",
                     "McNemar's exact test on the examples two heads disagree on, same seed and same "
                     "evaluation set, as recorded in each record's paired_tests. The p-values here are per "
                     "pair and uncorrected; the rank bands and findings above correct them (Holm)."),
}
BANDS_CAPTION = (
    "Within one model, task and regime, heads the evidence cannot separate share a band; a head's band is 1 + "
    "the number of heads separated from it and better (band 1: nothing measured beats it). Evidence: the records' "
    "McNemar tests, seeds combined by the largest p-value (the pair must be separated in every seed, in the same "
    "direction: the seeds share the evaluation examples, so their tests are not independent), then Holm's "
    "correction over the pairs of the family (family-wise error 5%, valid under any dependence). Last-layer heads "
    "form one family (the pooling ablation); heads read from other layers are ranked among every head of their "
    "group. Without paired tests, non-overlapping 95% intervals separate.")
MODELS_CAPTION = (
    "Each task and regime its own panel; one colour per model; diamonds: mean over seeds at the last layer "
    "(main setup), whiskers: 95% interval across seeds. Grey open stars: published numbers for context, from "
    "other models and protocols (see the reference table below): never ranked, never in the findings.")
EFFECT_CAPTION = (
    "`pooler` minus `cls` per model and regime, paired by seed: the per-seed differences (open circles), their "
    "mean and 95% Student-t interval, in points. Zero means the pooler adds nothing to the raw [CLS] state; "
    "an untrained pooler (all-MiniLM-L6-v2's) should sit there, an NSP-trained one is where it can move.")

STYLE = """
body{font:15px/1.45 Helvetica,Arial,sans-serif;margin:0 auto;max-width:1280px;padding:0 24px 60px;color:#222}
h1{margin:24px 0 4px}h2{margin-top:40px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta,.caption{color:#555}.caption{max-width:900px}
nav a{margin-right:14px}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
th,td{border:1px solid #ddd;padding:4px 7px;text-align:left;vertical-align:top;white-space:nowrap}
th{background:#f4f4f4;cursor:pointer;white-space:nowrap;position:sticky;top:0}
th[data-dir=asc]::after{content:" ▲"}th[data-dir=desc]::after{content:" ▼"}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.cmd{font-family:monospace;font-size:12px;white-space:normal;word-break:break-all;min-width:320px;max-width:520px}
td.ids{font-family:monospace;font-size:12px;white-space:normal;min-width:150px;max-width:160px}
.findings{background:#f3f8f2;border:1px solid #b9d7b0;padding:6px 18px 6px 30px;margin:14px 0}
.findings li{margin:6px 0}.findings code,.examples code{background:#e8eee6;padding:0 3px}
table.examples td{white-space:normal;max-width:700px}
details{margin:6px 0}summary{cursor:pointer}
details.section{border-top:1px solid #ddd;margin:0}details.section>summary{padding:2px 0}
details.section>summary h2{display:inline-block;margin:10px 0;border:0;font-size:1.25em}
table.headline td{white-space:normal;vertical-align:top}table.headline td:first-child{white-space:nowrap;font-weight:bold}
.pending{color:#777}
.refs td{white-space:normal;max-width:420px}.refs{border-left:4px solid #9a9a9a}
tr.sig td{background:#eef5fc}
.problems{background:#fff4f0;border:1px solid #e8b4a0;padding:8px 14px;margin-top:16px}.problems h2{margin-top:8px}
input.filter{font-size:14px;padding:4px 8px;width:340px;margin-right:12px}
.scroll{overflow-x:auto}
.box{max-height:560px;overflow:auto;border:1px solid #eee}.box.short{max-height:420px}
.answer{background:#f7faff;border:1px solid #c9d8ee;padding:4px 18px 12px;margin:14px 0}
.answer h2{margin-top:10px}.answer h3{margin:16px 0 4px}.answer p{margin:4px 0 8px;max-width:1100px}
table.compact td,table.compact th{padding:3px 9px}table.compact th{cursor:default;position:static}
table.examples td div{margin:2px 0}.nofig{color:#a33}
"""

# Click a header to sort (numbers by their data-v value), type in the box to keep matching rows; bindTables(root)
# again for a table unpacked later (packing.py).
SCRIPT = """
function bindTables(root){
root.querySelectorAll("table.sortable th").forEach(function(th){th.addEventListener("click",function(){
 var t=th.closest("table"),i=th.cellIndex,dir=th.dataset.dir==="asc"?-1:1,b=t.tBodies[0];
 t.querySelectorAll("th").forEach(function(h){delete h.dataset.dir});th.dataset.dir=dir>0?"asc":"desc";
 function v(r){var c=r.cells[i];return c.dataset.v!==undefined?parseFloat(c.dataset.v):c.textContent.toLowerCase()}
 Array.from(b.rows).sort(function(x,y){var p=v(x),q=v(y);return (p>q?1:p<q?-1:0)*dir})
  .forEach(function(r){b.appendChild(r)});});});
root.querySelectorAll("input.filter").forEach(function(inp){inp.addEventListener("input",function(){
 var w=inp.value.toLowerCase().split(/\\s+/).filter(Boolean),t=document.getElementById(inp.dataset.table);
 Array.from(t.tBodies[0].rows).forEach(function(r){var s=r.textContent.toLowerCase();
  r.hidden=!w.every(function(x){return s.indexOf(x)>=0})});});});}
bindTables(document);
"""

e = html.escape


def _cell(value, numeric: bool = False, cls: str = "") -> str:
    if numeric and value is not None and not (isinstance(value, float) and pd.isna(value)):
        # 0-1 metrics and their spreads to 4 decimals (0.0007, not 0.0006621), 0-100 ones and seconds
        # to 2; counts with thousands separators.
        shown = (f"{value:,}" if isinstance(value, int) else
                 (f"{value:.4f}" if abs(value) < 1 else f"{value:.2f}") if isinstance(value, float) else value)
        return f'<td class="num" data-v="{e(str(value))}">{e(str(shown))}</td>'
    text = "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)
    return f'<td class="{cls}">{e(text)}</td>' if cls else f"<td>{e(text)}</td>"


def html_table(df: pd.DataFrame, table_id: str, numeric=(), classes: dict | None = None,
               row_class=None, search: bool = True, box: bool = False) -> str:
    """A sortable (and optionally searchable) HTML table; numeric columns sort by value. `box`: a long table
    scrolls inside a box of its own (its header stays in view) instead of making the page long."""
    classes = classes or {}
    head = "".join(f"<th>{e(str(c))}</th>" for c in df.columns)
    body = []
    for _, row in df.iterrows():
        cls = f' class="{row_class(row)}"' if row_class and row_class(row) else ""
        cells = "".join(_cell(_plain(row[c]), c in numeric, classes.get(c, "")) for c in df.columns)
        body.append(f"<tr{cls}>{cells}</tr>")
    scroll = "scroll box" if box else "scroll"
    search_box = (f'<input class="filter" data-table="{table_id}" placeholder="search (all words must match)">'
                  if search else "")
    return (f'{search_box}<div class="{scroll}"><table id="{table_id}" class="sortable"><thead><tr>{head}</tr>'
            f'</thead><tbody>{"".join(body)}</tbody></table></div>')


def shown_path(path: str) -> str:
    """A record file as the reader would type it: relative to where the report was built, when inside it
    (a published report should not carry this machine's absolute paths)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _plain(v):
    # numpy scalars -> Python, so formatting and escaping see ints and floats.
    return v.item() if hasattr(v, "item") else v


def _problems_html(problems: list[Problem]) -> str:
    if not problems:
        return ""
    items = "".join(f"<li><code>{e(shown_path(p.path))}</code> line {p.line}: {e(p.message)}</li>" for p in problems)
    return (f'<section id="problems" class="problems"><h2>Skipped: {len(problems)} bad line(s)</h2>'
            f"<p>These lines failed validation and are left out of everything below.</p><ul>{items}</ul></section>")


def _pairs_html(df: pd.DataFrame) -> str:
    p = data.pairs(df)
    if p.empty:
        return "<p>No paired tests in these records.</p>"
    rows = []
    for (model, task, regime, a, b), g in p.groupby(["model", "task", "regime", "a", "b"], sort=False):
        rows.append({"model": model, "task": task, "regime": regime, "head": a, "vs": b,
                     "seeds": len(g), "median p": float(g["p_value"].median()),
                     "p<0.05 in": f"{int((g['p_value'] < figures.ALPHA).sum())}/{len(g)} seeds",
                     "head right only": int(pd.to_numeric(g["a_only"]).sum()),
                     "vs right only": int(pd.to_numeric(g["b_only"]).sum()),
                     "p per seed": ", ".join(f"{s}: {v:.3g}" for s, v in zip(g["seed"], g["p_value"]))})
    out = pd.DataFrame(rows).sort_values(["model", "task", "regime", "median p"], kind="stable")
    return html_table(out, "pairs", numeric={"seeds", "median p", "head right only", "vs right only"},
                      row_class=lambda r: "sig" if r["median p"] < figures.ALPHA else "", box=True)


def _records_frame(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the distinct runs: command, commit, versions, device as P1, P2, ...; every record naming its own)."""
    keys = ["command", "git_commit", "versions", "device"]
    prov = df[keys].drop_duplicates().reset_index(drop=True)
    prov.insert(0, "id", [f"P{i + 1}" for i in range(len(prov))])
    ids = {tuple(r[k] for k in keys): r["id"] for _, r in prov.iterrows()}
    recs = df.assign(provenance=[ids[tuple(r[k] for k in keys)] for _, r in df.iterrows()],
                     file=df["file"].map(shown_path),
                     metrics=df["metrics"].map(lambda m: ", ".join(f"{k} {v:.4g}" for k, v in sorted(m.items()))))
    cols = ["run_id", "model", "task", "regime", "pooling", "layer_label", "seed", "main_metric", "value", "metrics",
            "n_train", "n_eval", "data_short", "dtype", "wall_s", "timestamp", "git_short", "provenance", "file"]
    return prov, recs[cols].rename(columns={"layer_label": "layer"})


def _provenance_html(df: pd.DataFrame, records_link: str | None = None) -> str:
    """The distinct runs, then every record (with its provenance id, metrics and file) as a packed CSV download."""
    prov, _ = _records_frame(df)
    notes = sorted({n for n in df["pooler_provenance"] if n})
    notes_html = "".join(f"<p><b>pooler</b> records: the checkpoint's pooler is {e(n)}.</p>" for n in notes)
    every = f"<p>Every record ({len(df)}), with its provenance id, metrics and file: {records_link} (CSV).</p>" \
        if records_link else ""
    return ("<h3>Runs (command, code, libraries, machine)</h3>"
            + html_table(prov, "prov", classes={"command": "cmd", "versions": "cmd"}, search=False, box=True)
            + notes_html + every)


def _inline_md(text: str) -> str:
    """A generated sentence's `code` spans as <code>; everything else escaped."""
    parts = e(text).split("`")
    return "".join(f"<code>{s}</code>" if i % 2 else s for i, s in enumerate(parts))


PRETRAINING_FIGURE = "pretraining"


def _pretraining_html() -> str:
    """The twins' pre-training curves: where each run stands and its held-out masked-LM accuracy by tokens."""
    runs = [f"<code>{e(n)}</code>: {e(pretraining.source(n)[1])}" for p in pretraining.pretrained_pairs()
            for n in (p.nsp, p.control)]
    return (f"<h3>Pre-training curves</h3><p class=\"caption\">{e(pretraining.CAPTION)} "
            + "; ".join(runs) + ".</p>" + packing.figure_div(PRETRAINING_FIGURE))


def _twins_html(df: pd.DataFrame) -> str:
    """What NSP pre-training changes: each pair of twins with records (its label and caveat, its cells side by
    side, its sentences), the seed spread, the pairs without records in one line, the published pairs apart."""
    v = twins.view(df)
    if v.empty:
        return f"<p>{_inline_md(twins.EMPTY)}</p>" + _pretraining_html()
    out = [f'<p class="caption">{e(twins.CAPTION)}</p>']
    for i, (pair, comp) in enumerate(v.pairs):
        body = (f"<p>{_inline_md(twins.no_records(pair))}</p>" if comp.empty else
                html_table(twins.display(comp), f"twins-{i}", search=False) + '<ul class="findings">'
                + "".join(f"<li>{_inline_md(x)}</li>" for x in twins.sentences(comp)) + "</ul>")
        out.append(f"<h3>{_inline_md(twins.heading(pair))}</h3>"
                   + f'<p class="caption">{_inline_md(twins.caption(pair))}</p>' + body)
    for i, s in enumerate(v.spreads):
        out.append(f"<h3>{e(twins.spread_heading(s))}</h3>" + (
            f"<p>{_inline_md(twins.spread_no_cells(s))}</p>" if s.frame.empty else
            f'<p class="caption">{e(twins.SPREAD_CAPTION)}</p>'
            + html_table(twins.spread_display(s), f"twins-spread-{i}", search=False)))
    if v.without_records:
        out.append(f"<p>{_inline_md(twins.without_records_line(v.without_records))}</p>")
    published = twins.published_lines(v.tasks)
    if published:
        out.append(f'<p class="caption">{e(twins.PUBLISHED)}</p><ul>'
                   + "".join(f"<li>{e(x)}</li>" for x in published) + "</ul>")
    return "".join(out) + _pretraining_html()


def _findings_html(df: pd.DataFrame, tests: pd.DataFrame | None = None) -> str:
    items = findings.findings(df, tests=tests)
    if not items:
        return "<p>No findings yet: no records with a last-layer head.</p>"
    why = (f'<p class="caption">{_inline_md(findings.WHY)}</p>'
           if any(f.get("steady_not_significant") for f in items) else "")
    return '<ul class="findings">' + "".join(f"<li>{_inline_md(f['sentence'])}</li>" for f in items) + "</ul>" + why


def _bands_html(band_frame: pd.DataFrame) -> str:
    if band_frame.empty:
        return "<p>No records.</p>"
    b = band_frame.assign(head=band_frame["head"].str.replace("@last", "", regex=False),
                          ranked=["pooling ablation (last layer)" if lay == -1 else "layer ablation (every layer)"
                                  for lay in band_frame["layer"]],
                          _f=[0 if lay == -1 else 1 for lay in band_frame["layer"]],
                          model=band_frame["model"].map(short_name),
                          evidence=band_frame["basis"].str.replace(r"^paired tests among [a-z\- ]+ \((.*)\)$", r"\1",
                                                                   regex=True))
    b = b.sort_values(["task", "model", "regime", "_f", "band", "mean"], ascending=[True, True, True, True, True, False],
                      kind="stable")
    b = b[["task", "model", "regime", "ranked", "head", "mean", "band", "n_seeds", "evidence"]]
    return html_table(b, "bands", numeric={"mean", "band", "n_seeds"},
                      row_class=lambda r: "sig" if r["band"] == 1 else "", box=True)


def _models_html(df: pd.DataFrame) -> str:
    eff = compare.pooler_minus_cls(df)
    if not eff.empty:
        eff = eff.assign(model=eff["model"].map(short_name), **{
            "mean (points)": eff["mean"].round(2),
            "95% CI (points)": ["n/a (one seed)" if pd.isna(lo) else f"[{lo:+.2f}, {hi:+.2f}]"
                                for lo, hi in zip(eff["ci95_low"], eff["ci95_high"])]})
        eff = eff[["model", "task", "regime", "seeds", "differences", "mean (points)", "95% CI (points)"]]
    refs = references.table()
    return (f'<p class="caption">{e(MODELS_CAPTION)}</p>'
            + packing.figure_div("models")
            + "<h3>Model × pooling (last layer): mean ± std (seeds)</h3>"
            + html_table(compare.model_pooling_table(df), "model-pooling", search=False)
            + f'<h3>Does a trained pooler help? <code>pooler</code> minus <code>cls</code></h3><p class="caption">'
            + e(EFFECT_CAPTION) + "</p>" + packing.figure_div("pooler_effect")
            + (html_table(eff, "pooler-effect-table", numeric={"mean (points)"}, search=False) if not eff.empty else "")
            + '<h3 id="references">Published numbers (context, not ranked)</h3><p class="caption">From the papers, '
            "checked against their text; other models, data and protocols than berteval's, so they sit beside the "
            "measured rows and are never ranked with them.</p>"
            + '<div class="refs">' + html_table(refs, "refs", numeric={"published value"}, search=False) + "</div>")


@dataclass
class Beside:
    """What a report links to, written in a folder beside it (`write_report`): {file name: text}."""
    folder: str  # the folder's name, relative to the HTML file
    files: dict[str, str] = field(default_factory=dict)

    def href(self, name: str) -> str:
        return f"{self.folder}/{name}"


def _estimates_html(est: pd.DataFrame) -> str:
    tables = overview.estimate_tables(est)
    if not tables:
        return "<p>No k-fold records.</p>"
    return "".join(f"<h3>{e(t)}</h3>" + html_table(frame.assign(record=frame["record"].str.strip("`")),
                                                    f"estimates-{i}", search=False)
                   for i, (t, frame) in enumerate(tables))


NAV = [("findings", "findings"), ("twins", "NSP twins"), ("models", "models"), ("ablation", "ablation"),
       ("layers", "layers"), ("heatmap", "task × pooling"), ("significance", "significance"),
       ("learning_curves", "learning curves"), ("every_layer", "every layer"), ("span_vector", "span QA from one vector"),
       ("bands", "rank bands"), ("table", "table"), ("estimates", "k-fold estimates"), ("disagreements", "examples"),
       ("pairs-section", "paired tests"), ("provenance", "provenance")]


PACKED_SECTIONS = ("bands", "table", "disagreements", "pairs-section")  # long tables: 0.8 MB of HTML, 0.1 MB packed


def _section(sid: str, heading: str, body: str, packs: dict | None = None) -> str:
    """A closed section: its heading always in view, its body on demand (and opened by a link to it). With `packs`,
    a long body goes there packed, put in the page when the section opens."""
    if packs is not None and sid in PACKED_SECTIONS:
        packs[f"pack-html-{sid}"] = packing.pack(body)
        body = packing.lazy_html(f"pack-html-{sid}")
    return f'<details id="{sid}" class="section"><summary><h2>{heading}</h2></summary>{body}</details>'


def _answer_html(answer: list[dict]) -> str:
    """The first screen: one row per task, then each task's every-model view on demand."""
    return ('<section id="answer" class="answer"><h2>What the records say</h2><p class="caption">Which vector should '
            "a head read: the <code>[CLS]</code> state, <code>pooler_output</code> or a mean over tokens? One row per "
            "task: the best head measured, and the three side by side on the reference encoder (all-MiniLM-L6-v2, "
            "<code>--model default</code>), the best in bold, with what the paired tests say (Holm-adjusted). Last "
            "layer, mean over seeds, each setup trained on its largest training set.</p>"
            + (overview.headline_html(answer) if answer else
               "<p>There are no result records yet: write some with <code>python -m berteval run ...</code>.</p>")
            + '<details id="every-model"><summary>Every model, per task: <code>cls</code>, <code>pooler</code>, '
              "<code>mean</code> and the best head of any pooling, with one sentence each</summary>"
            + overview.as_html(answer) + "</details></section>")


def _figure_sections(figs: dict) -> list[str]:
    out = []
    for name in figs:
        if name in ("models", "pooler_effect", PRETRAINING_FIGURE):
            continue  # drawn in the models section; the pre-training curves in the twins' section
        heading, caption = {**CAPTIONS, **curves.CAPTIONS}[name]
        out.append(_section(name, e(heading), f'<p class="caption">{e(caption)}</p>{packing.figure_div(name)}'))
    return out


def _table_section(tab: pd.DataFrame, csv_link: str, packs: dict) -> str:
    numeric = {"mean", "std", "ci95_low", "ci95_high", "n_seeds", "n_train", "n_eval"}
    return _section("table", "Leaderboard table", (
        '<p class="caption">One row per model × task × regime × pooling × layer × setup: mean ± sample std across '
        "seeds, 95% Student-t interval, seeds, examples, data checksum (first 12 hex digits of sha256), the command "
        f"that reproduces it and its record ids. Click a header to sort. {csv_link}</p>"
        + html_table(tab, "leaderboard", numeric=numeric, classes={"reproduce": "cmd", "run_ids": "ids"}, box=True)),
        packs)


def _detail_sections(ranked, df, band_frame, tests, tab, csv_link, apart, examples, records_link, figs,
                     packs: dict) -> list[str]:
    return [
        _section("findings", "Findings in full", (
            '<p class="caption">Written from the records, one sentence per task, model and regime: the best last-layer '
            "head, then its margin over each other head (mean of the per-seed differences with its 95% t-interval, "
            "which shows how much the margin moves between seeds, not the sampling of the evaluation set) and the "
            "paired test as the rank bands read it.</p>" + _findings_html(ranked, tests))),
        _section("twins", "What NSP pre-training changes: the pairs of twins", _twins_html(ranked)),
        _section("models", "Models side by side", _models_html(ranked)),
        *_figure_sections(figs),
        _section("bands", "Rank bands", f'<p class="caption">{e(BANDS_CAPTION)}</p>' + _bands_html(band_frame), packs),
        _table_section(tab, csv_link, packs),
        _section("estimates", "k-fold estimates: shown apart, never ranked", (
            '<p class="caption">Each dev example scored by a head trained on the other folds (dev articles for SQuAD, '
            "dev pairs for QNLI): not official-dev scores, so never in a band, a finding, a figure or the table.</p>"
            + _estimates_html(apart))),
        _section("disagreements", "The examples behind the tests", (
            '<p class="caption">For every pair of last-layer heads McNemar-tested on the same examples (main setup, '
            "lowest seed): how many examples each gets right that the other gets wrong (the McNemar counts), and the "
            "two of each kind where the wrong head was most sure. Every example of one pair: <code>python -m berteval "
            "disagree --task TASK --model MODEL --a HEAD --b HEAD --seed N --data-dir ../shared/data</code>, or the "
            "app's viewer.</p>" + examples), packs),
        _section("pairs-section", "Paired tests", (
            '<p class="caption">Every pair of heads compared on the same examples and seed; shaded rows: median p '
            "&lt; 0.05 (uncorrected).</p>" + _pairs_html(ranked)), packs),
        _section("provenance", "Provenance", (
            '<p class="caption">Where every number came from: the command that wrote it, the git commit of the code, '
            "library versions and the machine.</p>"
            + (_provenance_html(df, records_link) if not df.empty else "<p>No records.</p>"))),
    ]


def build_html(df: pd.DataFrame, problems: list[Problem], sources: list[str] | None = None,
               title: str = "berteval leaderboard", data_dir=None, beside: Beside | None = None) -> str:
    """The whole report as one self-contained HTML string. `data_dir` (or $BERTEVAL_DATA) adds each disagreeing
    example's text. With `beside`, every disagreeing example and every record also go into `beside.files` as CSV
    (the caller writes them) and the page links them."""
    sources = sources if sources is not None else sorted(set(df["file"]))
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    apart = data.estimates(df) if not df.empty else data.estimates(data.frame([]))
    est_mask = data.is_estimate(df) if not df.empty else pd.Series(False, index=df.index)
    # k-fold estimates are shown apart, never ranked, drawn or compared; main setups flagged once (cells.py)
    ranked = cells.mark_main(df[~est_mask])
    band_frame = bands.rank_bands(ranked)
    tests = bands.pair_tests(ranked, "last")
    figs = {name: (fn(ranked, band_frame) if name == "ablation" else fn(ranked))
            for name, fn in FIGURE_FUNCTIONS.items()}
    figs[PRETRAINING_FIGURE] = pretraining.figure()  # from the committed runs' files, not from the records
    tab = table.leaderboard_table(ranked, band_frame=band_frame)
    packs = {"pack-table": packing.pack(table.to_csv(tab))}
    csv_link = packing.download("pack-table", "berteval-leaderboard.csv", "Download CSV")
    examples, every = disagreements.report_section(ranked, data_dir, per_kind=2,
                                                   href=beside.href if beside is not None else None)
    records_link = None
    if not df.empty:
        packs["pack-records"] = packing.pack(table.to_csv(_records_frame(df)[1]))
        records_link = packing.download("pack-records", "berteval-records.csv", "records.csv")
    if beside is not None:
        for name, frame in every.items():
            beside.files[name] = table.to_csv(frame)
    body = [
        f"<h1>{e(title)}</h1>",
        f'<p class="meta">{len(df)} record(s) from {len(sources)} file(s), generated {now}. '
        f"Sources: {', '.join(f'<code>{e(shown_path(s))}</code>' for s in sources) or 'none'}.</p>",
        _answer_html(overview.overview(ranked, band_frame, tests, apart)),
        "<nav>" + "".join(f'<a href="#{sid}">{e(label)}</a>' for sid, label in NAV) + "</nav>",
        _problems_html(problems),
        *_detail_sections(ranked, df, band_frame, tests, tab, csv_link, apart, examples, records_link, figs, packs),
    ]
    packed = "".join(packing.element(k, v) for k, v in packs.items())
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{e(title)}</title>"
            f"<style>{STYLE}</style></head><body>{''.join(body)}"
            f"{packing.plotly_element()}{packing.figures_element(figs)}{packed}"
            f"<script>{SCRIPT}{packing.script()}</script></body></html>\n")


def write_report(out: str | os.PathLike, paths: Iterable[str | os.PathLike] | None = None,
                 title: str = "berteval leaderboard", repo: str | None = None,
                 data_dir=None, with_files: bool = False) -> tuple[Path, pd.DataFrame, list[Problem]]:
    """Load the records (the results root by default, or a dataset repo's snapshot), write the report (and, with
    `with_files`, every disagreeing example as CSV in `<name>_files/` beside it), return what it showed."""
    fetched: list[Problem] = []
    if paths is None:
        paths, fetched = data.default_paths(repo)
    files = data.record_files(paths)
    df, problems = data.load(files)
    problems = fetched + problems
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    beside = Beside(f"{out.stem}_files") if with_files else None
    page = build_html(df, problems, [str(f) for f in files], title, data_dir, beside)
    # Each file whole or not at all (a full disk, a file-size limit, a kill leave the previous one and say so);
    # the files the page links to first, the page last.
    if beside is not None:
        folder = out.parent / beside.folder
        for name, text in beside.files.items():
            write_atomic(folder / name, text.encode("utf-8"))
    write_atomic(out, page.encode("utf-8"))
    return out, df, problems
