"""The import graph of berteval/: no loop anywhere, and no arrow from a lower layer up to a higher one.

Each module's imports are read with `ast` (nothing is imported) and relative imports resolved.
Importing `a.b.c` also runs the `__init__` of `a` and `a.b`, so it is an arrow to those packages
too, from any module outside them. Loops are counted over module-level imports (what runs on
import; a `TYPE_CHECKING` block included, since a type hint is a dependency too) across all of
berteval/, and over every import, inside functions too, among the layered packages. The layer
rule counts every import, module-level and inside functions: a lazy import is an arrow all the
same, only a later one.

The layers, lowest first (docs/architecture.md, "Layers", says why this order):

    models < pooling < heads < qa < tasks < regimes < runs < cli

A module of one layer may import any lower layer and modules outside the list (errors, records,
store, features, ...), never a higher layer. `qa` sits below `tasks`: the SQuAD task reads the QA
defaults (`berteval.qa.DEFAULTS`), and nothing in `qa` knows what a task or a regime is.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "berteval"
LAYERS = ["models", "pooling", "heads", "qa", "tasks", "regimes", "runs", "cli"]  # lowest first


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_package(name: str) -> bool:
    return MODULES.get(name, Path()).name == "__init__.py"


def _resolve(importer: str, node: ast.ImportFrom | ast.Import) -> list[str]:
    """The berteval modules an import statement names (a module, or a package's __init__)."""
    if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
    else:
        if node.level:
            base = importer.split(".")
            base = base[: len(base) - node.level + (1 if _is_package(importer) else 0)]
            stem = ".".join(base + ([node.module] if node.module else []))
        else:
            stem = node.module or ""
        # `from pkg import name`: the module pkg.name where there is one, else pkg itself
        targets = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in MODULES else stem for a in node.names]
    out = []
    for target in targets:
        while target and target not in MODULES:  # `import berteval.qa.windows.x` -> the deepest module known
            target = target.rpartition(".")[0]
        if target:
            out.append(target)
    return out


def _with_parents(importer: str, target: str) -> set[str]:
    """`target` and the packages above it whose __init__ importing it runs (those the importer is not inside)."""
    out, parts = {target}, target.split(".")
    for i in range(1, len(parts)):
        parent = ".".join(parts[:i])
        if not (importer == parent or importer.startswith(parent + ".")):
            out.add(parent)
    return out


def _imports(name: str) -> tuple[set[str], set[str]]:
    """(module-level imports, imports inside functions) of one module, as berteval module names."""
    tree = ast.parse(MODULES[name].read_text(), filename=str(MODULES[name]))
    top: set[str] = set()
    inner: set[str] = set()

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            here = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for target in _resolve(name, child):
                    (inner if here else top).update(t for t in _with_parents(name, target) if t != name)
            walk(child, here)

    walk(tree, False)
    return top, inner


GRAPH = {name: _imports(name) for name in MODULES}


def _layer(name: str) -> int | None:
    parts = name.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan), each a loop of imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_walk_reads_what_it_should():
    """The reader itself: relative imports resolve, function-level imports are found, parents are arrows."""
    runs_top, _ = GRAPH["berteval.runs"]
    assert {"berteval.regimes", "berteval.regimes.base", "berteval.records"} <= runs_top
    _, cli_inner = GRAPH["berteval.cli"]
    assert "berteval.runs" in cli_inner  # `from . import pooling, runs` inside _cmd_run
    squad_top, _ = GRAPH["berteval.tasks.squad"]
    assert "berteval.qa" in squad_top  # `from ..qa import DEFAULTS`
    assert set(LAYERS) <= {name.split(".")[1] for name in MODULES if "." in name}


def test_no_import_loop_anywhere_in_berteval():
    """What runs when a module is imported (module-level imports, type hints included): no loop anywhere."""
    assert _cycles({name: top for name, (top, _) in GRAPH.items()}) == []


def test_the_layers_have_no_loop_even_through_imports_inside_functions():
    """Among the layered packages, a lazy import closes no loop either: each arrow runs one way."""
    layered = {name: {t for t in top | inner if _layer(t) is not None}
               for name, (top, inner) in GRAPH.items() if _layer(name) is not None}
    assert _cycles(layered) == []


def test_no_arrow_runs_up_the_layers():
    up = sorted(f"{name} -> {target}" for name, (top, inner) in GRAPH.items() for target in top | inner
                if _layer(name) is not None and _layer(target) is not None and _layer(target) > _layer(name))
    assert up == [], "imports from a lower layer to a higher one (order: " + " < ".join(LAYERS) + ")"


def test_qa_imports_no_regime_and_no_task():
    qa = {f"{name} -> {target}" for name, (top, inner) in GRAPH.items() if _layer(name) == LAYERS.index("qa")
          for target in top | inner if target.startswith(("berteval.regimes", "berteval.tasks", "berteval.runs"))}
    assert qa == set()
