"""Layering rules that keep the library light and the data out of the repository."""

import os
import subprocess
import sys

from conftest import REPO


def test_berteval_never_imports_gradio_or_plotly():
    code = ("import sys, berteval, berteval.cli, berteval.runs, berteval.models, berteval.tasks; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('gradio', 'plotly')]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


def test_no_shared_data_committed():
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True).stdout.split()
    assert not [f for f in files if f.endswith(("dev-v1.1.json", "train-subset.json", "train.tsv", "dev.tsv"))]


def test_light_commands_import_neither_torch_nor_transformers(tmp_path):
    """`ls`, `validate`, `summary`, `export`, `disagree` and the leaderboard report answer in a fraction of a
    second because they never import the deep-learning stack (nor evaluate, which imports it)."""
    code = (
        "import sys\n"
        "from berteval.cli import main\n"
        "import leaderboard.__main__ as board\n"
        "records = 'leaderboard/results/sst2.jsonl'\n"
        "assert main(['ls']) == 0 and main(['validate', records]) == 0 and main(['summary', records]) == 0\n"
        f"assert main(['export', 'model-index', '--model', 'default', '--out', {str(tmp_path / 'm.yaml')!r}]) == 0\n"
        "assert main(['disagree', '--task', 'sst2', '--a', 'mean', '--b', 'cls', '--limit', '2']) == 0\n"
        # the report of one record file: the imports are those of the whole report's, in a fraction of its time
        f"assert board.main(['--out', {str(tmp_path / 'r.html')!r}, records]) == 0\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'sklearn', 'datasets', 'evaluate')]\n"
        "assert not heavy, heavy[:5]\n"
    )
    # Without a data dir: texts (disagree, the report's examples) are what would load `datasets`.
    env = {k: v for k, v in os.environ.items() if k != "BERTEVAL_DATA"}
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, capture_output=True, env=env)


def test_no_function_in_berteval_is_longer_than_90_lines():
    """A function past 90 lines (the `def` line to its last line, decorators not counted) does several things:
    split a well-named helper out of it. Methods and nested functions count on their own."""
    import ast

    longest = 90
    too_long = []
    for path in sorted((REPO / "berteval").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > longest:
                    too_long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({lines} lines)")
    assert not too_long, f"functions over {longest} lines: " + "; ".join(too_long)
