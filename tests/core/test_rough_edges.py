"""Common mistakes and what a newcomer is told (issue 40): a missing records file, the leaderboard without the
app extra, a seed with no records, and the run command's closing line telling the truth about what it encoded.
Each answer is one line that says what to do, with a non-zero exit where the command failed."""

from __future__ import annotations

import subprocess
import sys

from berteval.cli import main
from conftest import REPO

RESULTS = REPO / "leaderboard" / "results"


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_summary_of_a_missing_file_fails_and_names_it(capsys, tmp_path):
    missing = tmp_path / "sst2.jsonl"
    code, out, err = _cli(capsys, "summary", str(missing))
    assert code == 2 and out == ""
    assert err.strip() == (f"error: no such file: {missing}; summary reads record files (.jsonl) or folders of them, "
                           f"e.g. leaderboard/results/sst2.jsonl")


def test_summary_of_a_file_without_records_fails(capsys, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, _, err = _cli(capsys, "summary", str(empty))
    assert code == 2 and f"no valid records in {empty}" in err


def test_summary_reads_a_folder_as_validate_does(capsys):
    code, out, _ = _cli(capsys, "summary", str(RESULTS))
    assert code == 0 and " sst2 probe mean@-1 accuracy: " in out


def test_disagree_with_a_seed_that_has_no_records_names_the_seeds_that_do(capsys):
    code, _, err = _cli(capsys, "disagree", "--task", "sst2", "--model", "default", "--a", "mean", "--b", "cls",
                        "--seed", "7", "--results", str(RESULTS))
    assert code == 2
    assert err.strip().endswith("seed 7, for sentence-transformers/all-MiniLM-L6-v2: its seeds are 0, 1, 2, 3, 4 "
                                "(--seed)"), err
    assert len(err.splitlines()) == 1


def test_disagree_with_an_unknown_head_names_the_heads_of_the_regime(capsys):
    code, _, err = _cli(capsys, "disagree", "--task", "sst2", "--model", "default", "--a", "mean", "--b", "avg",
                        "--seed", "0", "--results", str(RESULTS))
    assert code == 2 and "no probe record of avg at layer -1 for" in err
    heads = err.split("its probe heads: ")[1].split(" (--a")[0].split(", ")
    assert {"cls", "mean", "pooler", "max"} <= set(heads) and len(err.splitlines()) == 1


def test_the_leaderboard_without_plotly_says_what_to_install(tmp_path):
    # plotly made unimportable in a child process, as on a machine installed without the app extra
    code = ("import runpy, sys\n"
            "class NoPlotly:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] == 'plotly':\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
            "sys.meta_path.insert(0, NoPlotly()); "
            f"sys.argv = ['leaderboard', '--out', {str(tmp_path / 'r.html')!r}]; "
            "runpy.run_module('leaderboard', run_name='__main__', alter_sys=True)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == ("error: the leaderboard needs plotly, which is not installed: pip install -r "
                                   "requirements.txt (or, for the package, pip install -e '.[app]')")
    assert not (tmp_path / "r.html").exists()


def test_the_squad_probe_says_what_it_encoded(capsys, tiny_models, tiny_squad_qa, tmp_path):
    code, out, err = _cli(capsys, "run", "--task", "squad", "--model", str(tiny_models["pretraining"]), "--regime",
                          "probe", "--seeds", "0", "--data-dir", str(tiny_squad_qa), "--out", str(tmp_path),
                          "--max-length", "32", "--doc-stride", "8", "--epochs", "1", "--batch-size", "4",
                          "--no-progress")
    assert code == 0, err
    last = out.splitlines()[-1]
    assert "encoded 0 " not in last and " training windows in " in last, last
    windows = int(last.split("; encoded ")[1].split(" ")[0].replace(",", ""))
    assert windows >= 6 * 3  # at least one window per training question (6 articles x 3 questions)
