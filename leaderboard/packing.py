"""What the one-file report carries packed: Plotly's JavaScript, the figures and the CSV downloads, gzip'd inside it.

The report must open offline from one file and stay small (issue 42: it was 1.7 MB of HTML plus 14.1 MB beside it,
and the folder beside it dirtied the clone it was written in). Plotly's minified JavaScript alone is 4.8 MB; gzip'd
and base64'd it is 2.0 MB, and the figures' JSON and the CSV files shrink ten-fold or more. Each pack is a
`<script type="application/gzip;base64">` element, which the browser never runs; the page's script unpacks one with
the browser's own `DecompressionStream` when it is first needed: Plotly and the figures when a figure's section is
opened, a CSV when its link is clicked. A browser without `DecompressionStream` (before 2023) gets a line in place
of each figure saying so; every number is in the page's tables anyway.
"""

from __future__ import annotations

import base64
import functools
import gzip
import html
import json

import plotly
from plotly.offline import get_plotlyjs

PLOTLY = "pack-plotly"
FIGURES = "pack-figures"

# Plotly's modebar once had "share to Plotly Cloud": an offline report must not offer an upload.
PLOT_CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["sendChartToCloud"]}


def pack(text: str, level: int = 9) -> str:
    """gzip then base64: what `unpack` in the page's script reverses. mtime=0: the same text packs the same."""
    return base64.b64encode(gzip.compress(text.encode("utf-8"), level, mtime=0)).decode("ascii")


@functools.lru_cache(maxsize=2)
def _plotly_pack(version: str) -> str:
    # Level 6: within 2% of level 9's size on Plotly's bundle, and a third of its time.
    return pack(get_plotlyjs(), level=6)


def element(pack_id: str, packed: str) -> str:
    return f'<script type="application/gzip;base64" id="{html.escape(pack_id)}">{packed}</script>'


def plotly_element() -> str:
    return element(PLOTLY, _plotly_pack(plotly.__version__))


def figures_element(figures: dict) -> str:
    """Every figure's JSON in one pack ({name: figure}): one gzip stream compresses their shared keys together."""
    return element(FIGURES, pack("{" + ",".join(f"{json.dumps(n)}:{f.to_json()}" for n, f in figures.items()) + "}"))


def figure_div(name: str) -> str:
    """Where a figure is drawn once its section opens."""
    return (f'<div class="plotly-graph-div lazy-fig" id="fig-{html.escape(name)}" data-fig="{html.escape(name)}">'
            f'<p class="pending">The figure is drawn when this section opens.</p></div>')


def lazy_html(pack_id: str) -> str:
    """Where a packed piece of the page (a long table) is put once its section opens."""
    return f'<div data-html="{html.escape(pack_id)}"><p class="pending">Unpacked when this section opens.</p></div>'


def download(pack_id: str, file_name: str, label: str) -> str:
    """A link that unpacks a CSV and saves it."""
    return (f'<a href="#" class="packed" download="{html.escape(file_name)}" data-pack="{html.escape(pack_id)}">'
            f"{html.escape(label)}</a>")


# unpack(id): the text of a pack (a promise, unpacked once). A <details> that opens (a click, or a link to a section)
# first fills in its packed HTML (bindTables: the report's sort and search), then draws its figures. Packed links
# build a Blob on the first click.
SCRIPT = """
var packs={},plotlyReady=null,figs=null,CONFIG=%CONFIG%;
function unpack(id){if(!packs[id]){packs[id]=(typeof DecompressionStream==="undefined")?
 Promise.reject(new Error("this browser cannot unpack the report's data (no DecompressionStream)")):
 new Response(new Blob([Uint8Array.from(atob(document.getElementById(id).textContent),function(c){
 return c.charCodeAt(0)})]).stream().pipeThrough(new DecompressionStream("gzip"))).text();}return packs[id];}
function loadPlotly(){if(!plotlyReady){plotlyReady=unpack("%PLOTLY%").then(function(js){
 var s=document.createElement("script");s.textContent=js;document.head.appendChild(s);});}return plotlyReady;}
function draw(div){if(div.dataset.drawn)return;div.dataset.drawn="1";
 Promise.all([loadPlotly(),figs||(figs=unpack("%FIGURES%").then(JSON.parse))]).then(function(r){
 var f=r[1][div.dataset.fig];div.innerHTML="";return Plotly.newPlot(div,f.data,f.layout,CONFIG);})
 .catch(function(e){div.innerHTML='<p class="nofig">This figure could not be drawn here ('+String(e.message||e)
 .replace(/[<>&]/g,"")+'); its numbers are in the tables.</p>';});}
function drawIn(el){el.querySelectorAll("[data-fig]").forEach(function(d){if(d.offsetParent!==null)draw(d);});}
function fill(el){return Promise.all(Array.from(el.querySelectorAll("[data-html]")).map(function(box){
 var id=box.dataset.html;delete box.dataset.html;return unpack(id).then(function(h){box.innerHTML=h;bindTables(box);})
 .catch(function(e){box.innerHTML='<p class="nofig">This section could not be unpacked here ('+String(e.message||e)
 .replace(/[<>&]/g,"")+').</p>';});}));}
document.querySelectorAll("details").forEach(function(d){d.addEventListener("toggle",function(){
 if(d.open)fill(d).then(function(){drawIn(d);});});});
function openTarget(){var t=location.hash&&document.getElementById(location.hash.slice(1));
 for(var n=t;n;n=n.parentElement){if(n.tagName==="DETAILS")n.open=true;}if(t)t.scrollIntoView();}
window.addEventListener("hashchange",openTarget);openTarget();
document.addEventListener("click",function(ev){var a=ev.target.closest&&ev.target.closest("a.packed");
 if(!a||a.dataset.ready)return;ev.preventDefault();unpack(a.dataset.pack).then(function(t){
 a.href=URL.createObjectURL(new Blob([t],{type:"text/csv"}));a.dataset.ready="1";a.click();});});
"""


def script() -> str:
    return (SCRIPT.replace("%CONFIG%", json.dumps(PLOT_CONFIG)).replace("%PLOTLY%", PLOTLY)
            .replace("%FIGURES%", FIGURES))
