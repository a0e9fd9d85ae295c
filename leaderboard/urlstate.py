"""A leaderboard view in the page's URL: which query parameters hold the filters, and the script that writes them.

A shared link such as `/?tab=leaderboard&task=sst2&model=...&pooling=cls&pooling=mean&q=probe` opens the
app on that view: the app's page-load handler reads the query (Gradio 6's `gr.Request.query_params`)
with `from_query`, sets the filters and builds the tab once. Each filter change runs `SYNC_JS` in the
browser first (Gradio's `js=` on the event): it rewrites the address bar with `history.replaceState`
(no reload, no new history entry) and hands the values on to the Python handler unchanged. Values the
records do not have are dropped with a note, so an old link still opens. Pure; no Gradio here.
"""

from __future__ import annotations

from typing import Mapping

FILTERS = ("model", "task", "pooling", "regime")
SEARCH = "q"
TAB = "leaderboard"

# Runs in the browser before the handler: (model, task, pooling, regime, search) -> the same values.
SYNC_JS = """(model, task, pooling, regime, search) => {
  const url = new URL(window.location.href);
  const put = (key, value) => {
    url.searchParams.delete(key);
    const values = Array.isArray(value) ? value : [value];
    values.filter(v => v && v !== "all").forEach(v => url.searchParams.append(key, v));
  };
  put("model", model); put("task", task); put("pooling", pooling); put("regime", regime); put("q", search);
  url.searchParams.set("tab", "leaderboard");
  window.history.replaceState(window.history.state, "", url.toString());
  return [model, task, pooling, regime, search];
}"""


# Runs in the browser once a shared link's table is shown; hands its inputs on unchanged. The page's heading and
# Encoder box take the first 330 px of a 900 px screen: a link that names the leaderboard (as `from_query` reads
# it) scrolls the tab bar to the top, so the filters and the task's first view share one screen. It reads the
# address, not the handler's `shared` State, which does not reach the browser.
SHOW_TAB_JS = """(...inputs) => {
  const q = new URL(window.location.href).searchParams;
  if (q.get("tab") === "leaderboard" || ["model", "task", "pooling", "regime", "q"].some(k => q.has(k))) {
    const tab = document.querySelector('button[role="tab"][aria-selected="true"]');
    if (tab) tab.scrollIntoView({block: "start"});
  }
  return inputs;
}"""


def _values(query, key: str) -> list[str]:
    if hasattr(query, "getlist"):  # starlette's QueryParams: a key may repeat
        return [v for v in query.getlist(key) if v]
    value = query.get(key) if isinstance(query, Mapping) else None
    return [v for v in ([value] if isinstance(value, str) else (value or [])) if v]


def from_query(query, choices: dict[str, list[str]]) -> dict:
    """{"shared": bool, "filters": {name: value}, "search": str, "notes": [str]} from a request's query.

    `shared` is true when the query names the leaderboard (tab=leaderboard) or any of its filters: the page
    then opens on that tab. A filter takes one value ('all' when absent) or, repeated, several; values not
    among `choices` are dropped and noted."""
    query = query or {}
    filters, notes = {}, []
    for name in FILTERS:
        wanted = _values(query, name)
        known = [v for v in wanted if v in choices.get(name, [])]
        notes += [f"no records have {name} {v!r}: the link's filter is ignored" for v in wanted if v not in known]
        filters[name] = known[0] if len(known) == 1 else (known if known else "all")
    search = " ".join(_values(query, SEARCH))
    shared = TAB in _values(query, "tab") or any(_values(query, n) for n in (*FILTERS, SEARCH))
    return {"shared": shared, "filters": filters, "search": search, "notes": notes}
