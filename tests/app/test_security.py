"""A public page that lets no one in, and writes that never claim success they did not have (one test
per fault found by trying the page as an attacker and the CLI as bad luck; docs/reliability.md lists them).

Payloads are the ones that worked before: a server folder typed into the Encoder box, HTML in a shared
link's `q=` and in a record's model name, a formula as a model name, a record's predictions file pointing
outside its folder, a file-size limit under a write, flipped bytes in a cache, a kill and resume, concurrent
cold requests for the random control, an environment that cannot be written, and cut or wrong data files.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO

PHISH = ('<img src="http://other-host/pixel"> <a href="http://other-host/phish">Session expired: click here to sign '
         'in again</a> <form action="http://other-host/f"><input name=password></form>')
MD_LINK = "[click here](http://other-host/phish)"


def _no_markup(text: str) -> None:
    """Nothing in `text` can render as a tag, a link, an image or a form (Gradio's Markdown renders HTML)."""
    assert "<img" not in text and "<a " not in text and "<form" not in text and "<input" not in text, text
    assert not re.search(r"(?<!\\)\]\(", text) and "http://" not in text, text  # escaped: \](, http\://


# -- 1. the Encoder box loads no server folder and names none ----------------------------------------------------

def test_the_page_refuses_every_server_folder_the_same_way(tmp_path, monkeypatch):
    from berteval import models, serve

    default_folder = str(models.default_model_path())
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "config.json").write_text("{}")
    tries = [default_folder, str(copy), str(Path.home() / ".ssh"), "/etc", "a/./b", "../outside", "~/x",
             "no/such/folder/at/all", default_folder.replace("/model", "/./model"), "owner/../name", "x" * 300]
    messages = set()
    for value in tries:
        with pytest.raises(Exception) as err:
            serve.public_model(value)
        messages.add(str(err.value))
    assert len(messages) == 2 or len(messages) == 1  # the same refusal (or the length limit), whatever exists
    for m in messages:
        assert "/" + "etc" not in m and str(Path.home()) not in m and default_folder not in m
    # Offline names and hub ids pass; a hub id never reads a local folder of the same name.
    assert serve.public_model("default") == "default"
    assert serve.public_model("bert-base-uncased") == "hub:bert-base-uncased"
    assert serve.public_model("google/bert_uncased_L-4_H-256_A-4") == "hub:google/bert_uncased_L-4_H-256_A-4"
    assert serve.public_model("tests") == "hub:tests"  # a folder of the repository, named like a hub id
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(models.HubUnavailable):
        models.identify("hub:tests")
    # An operator may allow a folder, exactly as listed.
    monkeypatch.setenv(serve.ALLOWED_FOLDERS_ENV, str(copy))
    assert serve.public_model(str(copy)) == str(copy)
    with pytest.raises(Exception):
        serve.public_model(str(copy) + "/.")


def test_page_messages_carry_no_server_path_or_exception_text(monkeypatch):
    import app

    box = app.classify(str(REPO / "leaderboard"), "A fine film.", "mean")[-1]
    assert "leaderboard" not in box["value"] and str(REPO) not in box["value"]

    def boom(*a, **k):
        raise PermissionError(13, "Permission denied", "/etc/shadow")

    monkeypatch.setattr(app.serve, "classify", boom)
    box = app.classify("default", "A fine film.", "mean")[-1]
    assert "shadow" not in box["value"] and "PermissionError" not in box["value"] and "logged" in box["value"]


# -- 2. HTML from a shared link or a record renders as text -----------------------------------------------------

class _Request:
    def __init__(self, query):
        self.query_params = query


def test_a_shared_link_cannot_inject_html(monkeypatch):
    import app

    out = app.board_from_url(_Request({"tab": "leaderboard", "q": PHISH, "model": PHISH}))
    note = out[-1]
    _no_markup(note)
    summary = app.board("all", "all", "all", "all", PHISH)[0]
    _no_markup(summary)
    _no_markup(app.board("all", "all", "all", "all", MD_LINK)[0])
    assert "Session expired" in summary  # shown, as text


def _records_with(tmp_path, model: str, tmp_name: str = "sst2") -> Path:
    root = tmp_path / "results"
    root.mkdir()
    src = [json.loads(line) for line in (REPO / "leaderboard" / "results" / "sst2.jsonl").read_text().splitlines()
           if line.strip()]
    probe = [r for r in src if r["regime"] == "probe" and r["layer"] == -1 and r["n_train"] > 60000][:6]
    for r in probe:
        r["model"] = model
        r["predictions_file"] = None
        r["paired_tests"] = []
    (root / f"{tmp_name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in probe))
    return root


def test_record_fields_cannot_inject_html(tmp_path, monkeypatch):
    import app
    import leaderboard

    root = _records_with(tmp_path, f"x{PHISH} {MD_LINK}")
    monkeypatch.setenv("BERTEVAL_RESULTS", str(root))
    findings, _ = app.board_context("all", "all", "all", "all")
    assert "frozen probe" in findings
    _no_markup(findings)
    v = leaderboard.views()
    for name in ("ablation", "models"):
        fig = v[name]
        assert fig is not None and "<img" not in fig.to_json() and "<a href" not in fig.to_json()


# -- 3. the CSV download runs no formula ----------------------------------------------------------------------

def test_csv_cells_that_start_a_formula_are_text(tmp_path, monkeypatch):
    import leaderboard

    monkeypatch.setenv("BERTEVAL_RESULTS", str(_records_with(tmp_path, '=HYPERLINK("http://other-host/csv","click")')))
    csv_text = leaderboard.views()["csv"]
    assert "'=HYPERLINK" in csv_text and "\n=HYPERLINK" not in csv_text and ",=HYPERLINK" not in csv_text


# -- 4. a record's predictions file is read only inside its results folder --------------------------------------

def test_predictions_outside_the_results_folder_are_refused(tmp_path):
    from berteval.errors import BertevalError
    from berteval.store import Store

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text(json.dumps({"pred": [1], "label": [1]}))
    root = tmp_path / "results"
    root.mkdir()
    store = Store(root)
    for rel in ("../outside/secret.json", str(outside / "secret.json"), "predictions/../../outside/secret.json"):
        with pytest.raises(BertevalError, match="outside its results folder"):
            store.inside(rel)
    (root / "predictions").mkdir()
    assert store.inside("predictions/x.json") == (root / "predictions" / "x.json").resolve()


def test_the_disagreement_view_does_not_read_outside(tmp_path):
    from berteval import disagree
    from berteval.errors import BertevalError
    from berteval.records import read_records
    from berteval.store import Store

    root = _records_with(tmp_path, "m")
    (tmp_path / "secret.json").write_text(json.dumps({"pred": [0], "label": [0]}))
    rec = read_records([root / "sst2.jsonl"])[0][0]
    rec.predictions_file = "../secret.json"
    with pytest.raises(BertevalError, match="outside"):
        disagree._read_predictions(Store(root), rec)


# -- 5. a cut write fails loudly and keeps the previous file -----------------------------------------------------

def _limited(code: str, limit_bytes: int) -> subprocess.CompletedProcess:
    def cap():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, preexec_fn=cap,
                          timeout=120)


def test_a_record_cut_by_a_file_size_limit_is_an_error_not_a_success(tmp_path):
    path = tmp_path / "sst2.jsonl"
    line = (REPO / "leaderboard" / "results" / "sst2.jsonl").read_text().splitlines()[0]
    path.write_text(line + "\n")
    before = path.read_bytes()
    code = (f"import json; from berteval.records import RunRecord; from berteval.store import append_record\n"
            f"d = json.loads({line!r}); d['run_id'] = 'ffffffffffffffff'\n"
            f"from berteval.records import read_records\n"
            f"rec = read_records([{str(path)!r}])[0][0]; rec.run_id = 'ffffffffffffffff'\n"
            f"print(append_record({str(path)!r}, rec))")
    done = _limited(code, len(before) + 300)
    assert done.returncode != 0 and "cannot write" in done.stderr and "True" not in done.stdout
    assert path.read_bytes() == before  # no cut line left behind


def test_export_under_a_file_size_limit_keeps_the_good_file(tmp_path):
    out = tmp_path / "model-index.yaml"
    good = subprocess.run([sys.executable, "-m", "berteval", "export", "model-index", "--model", "default",
                           "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert good.returncode == 0, good.stderr
    before = out.read_bytes()
    assert len(before) > 8192
    code = ("import sys; from berteval import cli; sys.exit(cli.main(['export', 'model-index', '--model', 'default', "
            f"'--out', {str(out)!r}]))")
    done = _limited(code, 4096)
    assert done.returncode != 0 and "cannot write" in done.stderr
    assert out.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_the_report_under_a_file_size_limit_keeps_the_good_one(tmp_path):
    """The leaderboard's report and the files beside it: each whole or not at all, one line of error."""
    records = tmp_path / "sst2.jsonl"
    records.write_text("".join(line + "\n" for line in
                               (REPO / "leaderboard" / "results" / "sst2.jsonl").read_text().splitlines()[:3]))
    out = tmp_path / "report.html"
    good = subprocess.run([sys.executable, "-m", "leaderboard", str(records), "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert good.returncode == 0, good.stderr
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert any(len(data) > 4096 for p, data in before.items() if p != out) and len(before[out]) > 4096
    done = _limited("import sys; import leaderboard.__main__ as board; "
                    f"sys.exit(board.main([{str(records)!r}, '--out', {str(out)!r}]))", 4096)
    assert done.returncode == 1 and "cannot write" in done.stderr and "Traceback" not in done.stderr
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before  # nothing cut, nothing left


def test_a_csv_download_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    import pandas as pd

    from berteval.errors import BertevalError
    from leaderboard import table

    path = tmp_path / "table.csv"
    table.to_csv(pd.DataFrame({"model": ["a", "b"]}), path)
    before = path.read_bytes()
    monkeypatch.setattr(os, "write", lambda fd, data: 0)  # what a full disk or a file-size limit does
    with pytest.raises(BertevalError, match="cannot write .*table.csv"):
        table.to_csv(pd.DataFrame({"model": ["c"] * 1000}), path)
    monkeypatch.undo()
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["table.csv"]


class _Adapter:
    """Stands in for a peft model: save_pretrained writes the adapter's files, or fails half way."""

    def __init__(self, weights: bytes, fail: bool = False):
        self.weights, self.fail = weights, fail

    def save_pretrained(self, folder: str) -> None:
        Path(folder, "adapter_model.safetensors").write_bytes(self.weights)
        if self.fail:
            raise OSError(27, "File too large")
        # as peft writes it: the base model's path on the machine that trained it
        Path(folder, "adapter_config.json").write_text('{"base_model_name_or_path": "/root/somewhere/model"}')
        Path(folder, "README.md").write_text("peft's template")


def test_an_adapter_is_saved_whole_or_the_previous_one_stays(tmp_path):
    from berteval.qa import inference
    from berteval.store import remove_stale_temporaries

    folder = tmp_path / "adapters" / "squad" / "abc"
    old = {"summary": "old", "base_model": "owner/base"}
    inference.save_adapter(_Adapter(b"old"), folder, old)
    assert sorted(p.name for p in folder.iterdir()) == ["adapter_config.json", "adapter_model.safetensors",
                                                        inference.ADAPTER_CONFIG]
    with pytest.raises(OSError, match="File too large"):
        inference.save_adapter(_Adapter(b"new weights", fail=True), folder, {**old, "summary": "new"})
    assert (folder / "adapter_model.safetensors").read_bytes() == b"old"
    assert json.loads((folder / inference.ADAPTER_CONFIG).read_text()) == old
    assert [p.name for p in folder.parent.iterdir()] == ["abc"]  # no staged folder left
    inference.save_adapter(_Adapter(b"new"), folder, {**old, "summary": "new"})
    # the machine's path replaced by the model's id: a committed adapter names no build machine
    assert json.loads((folder / "adapter_config.json").read_text())["base_model_name_or_path"] == "owner/base"
    assert (folder / "adapter_model.safetensors").read_bytes() == b"new"
    assert [p.name for p in folder.parent.iterdir()] == ["abc"]
    # A writer killed between the swap's two renames left the old folder aside and no new one; one killed while
    # staging left a staged folder. The next run in this results folder puts the first back and removes the second.
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    folder.rename(folder.with_name(f".abc.{dead}.old"))
    (folder.parent / f".xyz.{dead}.tmp").mkdir()
    assert remove_stale_temporaries(folder.parent) == 2
    assert [p.name for p in folder.parent.iterdir()] == ["abc"]
    assert (folder / "adapter_model.safetensors").read_bytes() == b"new"


# -- 6. the derivation cache is proved before use ---------------------------------------------------------------

def test_flipped_bytes_in_the_derivation_cache_are_detected(tmp_path, monkeypatch, capsys):
    import torch

    from berteval.derive import nsp_pooler

    calls = []

    def states(encoder, instances, tokenizer, progress=False):
        calls.append(1)
        return torch.arange(12, dtype=torch.float32).reshape(3, 4)

    monkeypatch.setattr(nsp_pooler, "cls_states", states)
    ctx = type("Ctx", (), {"progress": False})()
    base = type("Base", (), {"revision": "r"})()
    model = type("Model", (), {"base_model": None})()
    pairs = type("Pairs", (), {"sha256": "p", "instances": []})()
    first, _ = nsp_pooler._cached_states(ctx, base, model, pairs, None)
    again, _ = nsp_pooler._cached_states(ctx, base, model, pairs, None)
    assert len(calls) == 1 and torch.equal(first, again)
    (cache,) = (Path(os.environ["BERTEVAL_CACHE"]) / "derive").glob("cls-*.pt")
    data = bytearray(cache.read_bytes())
    data[-40] ^= 0x01  # same size
    cache.write_bytes(bytes(data))
    third, _ = nsp_pooler._cached_states(ctx, base, model, pairs, None)
    assert len(calls) == 2 and torch.equal(third, first)
    assert "does not match its checksum" in capsys.readouterr().err


# -- 7. a resumed training run reports the whole run -----------------------------------------------------------

def test_a_resumed_training_run_counts_every_step(tmp_path):
    import torch

    from berteval import training

    data = [{"x": torch.randn(4), "y": torch.tensor(i % 2)} for i in range(40)]

    def collate(rows):
        return {"x": torch.stack([r["x"] for r in rows]), "y": torch.stack([r["y"] for r in rows])}

    def loss_fn(model, batch):
        return torch.nn.functional.cross_entropy(model(batch["x"]), batch["y"])

    def fresh():
        torch.manual_seed(0)
        return torch.nn.Linear(4, 2)

    cfg = lambda d, stop=None: training.TrainConfig(epochs=2, batch_size=8, dtype="fp32", checkpoint_dir=d,  # noqa
                                                    checkpoint_every=3, stop_after_steps=stop)
    whole = training.train(fresh(), data, collate, loss_fn, cfg(tmp_path / "a"), progress=False)
    training.train(fresh(), data, collate, loss_fn, cfg(tmp_path / "b", 4), progress=False)
    resumed = training.train(fresh(), data, collate, loss_fn, cfg(tmp_path / "b"), progress=False)
    assert resumed.resumed_from_step == 4 and resumed.steps == whole.steps == 10
    assert resumed.examples_seen == whole.examples_seen == 80
    assert resumed.losses[0] == pytest.approx(whole.losses[0]) and len(resumed.losses) == 10


def test_the_committed_resumed_record_is_corrected():
    from berteval.records import read_records

    recs, _ = read_records([REPO / "leaderboard" / "results" / "sst2.jsonl"])
    (rec,) = [r for r in recs if r.run_id == "bf2f13f6957c58dc"]
    ft = rec.config["finetune"]
    assert ft["examples_seen"] == 7200 and ft["first_loss"] is None and "resumed at step 113" in ft["provenance_note"]


# -- 8. the random control under concurrent cold requests --------------------------------------------------------

def test_the_random_control_builds_under_concurrency(tmp_path):
    from transformers import AutoConfig

    from berteval import models
    from berteval.models import derived

    config = AutoConfig.from_pretrained(str(models.default_model_path()))
    config.num_hidden_layers = 1
    want = derived.state_sha256(derived.random_model(config, 0).state_dict())
    got, errors = [], []

    def build():
        try:
            got.append(derived.state_sha256(derived.random_model(config, 0).state_dict()))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and got == [want] * 8


# -- 9. the environment is checked before the work, and faults are one line -------------------------------------

def test_an_unwritable_environment_is_refused_before_any_work(tmp_path, tiny_models, tiny_sst2, monkeypatch, capsys):
    from berteval import cli

    base = ["run", "--task", "sst2", "--model", str(tiny_models["pretraining"]), "--pooling", "mean", "--seeds", "0",
            "--data-dir", str(tiny_sst2), "--no-progress"]
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    assert cli.main([*base, "--out", str(a_file / "results")]) == 2
    err = capsys.readouterr().err
    assert f"cannot write into {a_file / 'results'}" in err and "Traceback" not in err
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "sst2.jsonl").mkdir()  # the records file is a folder
    assert cli.main([*base, "--out", str(tmp_path / "r1")]) == 2
    err = capsys.readouterr().err
    assert "sst2.jsonl is not a file" in err and "Traceback" not in err
    assert not list((tmp_path / "r1").glob("predictions/sst2/*.json"))  # nothing computed, nothing orphaned
    monkeypatch.setenv("BERTEVAL_CACHE", str(a_file))
    assert cli.main([*base, "--out", str(tmp_path / "r2")]) == 2
    assert "is a file" in capsys.readouterr().err


def test_a_full_feature_cache_is_a_note_not_a_failure(tmp_path, tiny_models, tiny_sst2, monkeypatch):
    import errno

    from berteval import features
    from berteval import runs
    from berteval.tasks import TASKS

    def full(path, data):
        raise OSError(errno.EFBIG, "File too large", str(path))

    monkeypatch.setattr(features, "_write_atomic", full)
    report = runs.run(runs.RunSpec(TASKS["sst2"], model=str(tiny_models["pretraining"]), poolings=["mean"], seeds=[0],
                                   data_dir=tiny_sst2, out=tmp_path / "out", progress=False))
    assert len(report.written) == 1


# -- 10. bad data files are one line naming the file and row, before any model loads --------------------------------

GOOD = "sentence\tlabel\na fine film . \t1\na dull film . \t0\n"


@pytest.mark.parametrize("dev,says", [
    ("sentence\tlabel\na fine film . \t1\na dull film", "line 3: 1 columns"),
    ("sentence\tlabel\na fine film . \t7\n", "label '7'"),
    ("sentence\tlabel\n", "a header and no rows"),
    ("", "empty file"),
])
def test_bad_sst2_files_are_refused_with_the_row(tmp_path, dev, says, capsys):
    from berteval import cli

    (tmp_path / "sst2").mkdir()
    (tmp_path / "sst2" / "train.tsv").write_text(GOOD)
    (tmp_path / "sst2" / "dev.tsv").write_text(dev)
    assert cli.main(["run", "--task", "sst2", "--pooling", "mean", "--seeds", "0", "--data-dir", str(tmp_path),
                     "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "dev.tsv" in err and says in err and "Traceback" not in err


def test_a_dev_file_cut_at_a_row_boundary_is_named_not_official(tmp_path, capsys):
    from berteval.tasks import sst2

    official = (REPO.parent / "shared" / "data" / "sst2")
    if not official.is_dir():
        pytest.skip("needs ../shared/data")
    (tmp_path / "sst2").mkdir()
    (tmp_path / "sst2" / "train.tsv").write_text(GOOD)
    rows = (official / "dev.tsv").read_text().splitlines(keepends=True)
    (tmp_path / "sst2" / "dev.tsv").write_text("".join(rows[:501]))
    data = sst2.load(tmp_path)
    assert "sst2/dev.tsv is not the official file" in data.source and len(data.eval) == 500


def _squad(tmp_path, mutate) -> Path:
    art = {"title": "T", "paragraphs": [{"context": "The cat sat on the mat.",
                                         "qas": [{"id": "q1", "question": "Where?",
                                                  "answers": [{"text": "the mat", "answer_start": 15}]}]}]}
    mutate(art)
    (tmp_path / "squad").mkdir(exist_ok=True)
    for name in ("dev-v1.1.json", "train-subset.json"):
        (tmp_path / "squad" / name).write_text(json.dumps({"data": [art], "version": "1.1"}))
    return tmp_path


@pytest.mark.parametrize("mutate,says", [
    (lambda a: a["paragraphs"][0]["qas"][0].pop("answers"), "has no `answers`"),
    (lambda a: a["paragraphs"][0].pop("context"), "has no `context`"),
    (lambda a: a["paragraphs"][0]["qas"][0].pop("id"), "has no `id`"),
    (lambda a: a["paragraphs"][0]["qas"][0]["answers"][0].update(answer_start=3), "does not point at its text"),
])
def test_bad_squad_files_are_refused_with_the_field(tmp_path, mutate, says):
    from berteval.errors import BertevalError
    from berteval.tasks import squad

    with pytest.raises(BertevalError, match=says):
        squad.load(_squad(tmp_path, mutate))


def test_a_cut_squad_file_is_refused(tmp_path):
    from berteval.errors import BertevalError
    from berteval.tasks import squad

    root = _squad(tmp_path, lambda a: None)
    dev = root / "squad" / "dev-v1.1.json"
    dev.write_text(dev.read_text()[:-30])
    with pytest.raises(BertevalError, match="not valid JSON"):
        squad.load(root)


# -- 11. leftovers, folders, and memory ----------------------------------------------------------------------------

def test_a_killed_writers_temporary_is_removed_on_the_rerun(tmp_path):
    from berteval.store import Store

    store = Store(tmp_path)
    nbest = tmp_path / "predictions" / "squad" / "nbest"
    nbest.mkdir(parents=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = nbest / f".abc.json.{int(dead.stdout)}.tmp"
    stale.write_text("{")
    mine = nbest / f".def.json.{os.getpid()}.tmp"
    mine.write_text("{")
    store.check_writable("squad")
    assert not stale.exists() and mine.exists()


def test_validate_reads_a_folder_as_its_record_files(tmp_path, capsys):
    from berteval import cli

    root = _records_with(tmp_path, "m")
    assert cli.main(["validate", str(root)]) == 0
    assert "6 valid records, 0 bad lines in 1 files" in capsys.readouterr().out


def test_no_committed_adapter_names_the_machine_that_trained_it():
    """peft writes the base model's local path into adapter_config.json; berteval's save replaces it with the
    model's id (`models.base.save_peft`), for the SQuAD heads and the derived encoders alike."""
    found = sorted((REPO / "leaderboard" / "results").rglob("adapter_config.json"))
    assert len(found) >= 6
    for f in found:
        base = json.loads(f.read_text())["base_model_name_or_path"]
        assert not base.startswith(("/", ".")) and "\\" not in base, f"{f}: {base}"
