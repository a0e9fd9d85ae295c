"""Layering rules that keep the library light and the data out of the repository."""

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
