"""The distributed path, run for real: the fine-tune regime under `accelerate launch --multi_gpu
--num_processes 2` on this CPU machine (two processes joined over gloo: berteval's training asks
accelerate for the CPU where there is no GPU), uninterrupted and with either process SIGKILLed
mid-run.

    python tests/tools/accelerate_check.py                       # the embedded default model, $BERTEVAL_DATA or ../shared/data
    python tests/tools/accelerate_check.py --model tiny          # a 2-layer, 16-wide BERT on generated data

(`accelerate launch --cpu --num_processes 2` is not this: accelerate 1.16 starts ONE process for
it unless an MPI hostfile is given, and the record then says `processes: 1`.)

It runs `python -m berteval run --task sst2 --regime finetune --pooling cls,mean --seeds 0` on a
small seeded subset (`--limit-train`, `--limit-eval`) three times, each with its own results
folder and feature/checkpoint cache:
- `straight`: never interrupted;
- `kill rank 0`, `kill rank 1`: once the first cell has a training checkpoint on disk, that
  rank's process is SIGKILLed; the launcher is expected to stop the other one and fail; then
  the same command is run again and must finish.
It checks, and prints: each cell is one record (rank 0 writes, rank 1 never does), every record
says `processes: 2`, the interrupted cell resumed from its checkpoint (`resumed_from_step` > 0),
and each resumed cell equals the uninterrupted run's (metrics, held-out accuracy per epoch, the
selected epoch, every dev probability; the logged first/last loss are of the resumed session
only, so they are printed, not compared). Exit 1 if any check fails. Loopback only (gloo on
127.0.0.1); 5-10 minutes on 2 busy cores, much of it imports and checkpoints.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

POSITIVE, NEGATIVE = ["good", "great", "fine", "fun"], ["bad", "awful", "poor", "dull"]
FILLER = ["the", "movie", "film", "plot", "was", "is", "very", "and", "it", "story", "acting"]


def tiny_data(root: Path, n_train: int, n_dev: int) -> Path:
    """GLUE's SST-2 layout, learnable from one word per sentence."""
    rng = random.Random(0)

    def rows(n: int) -> str:
        out = []
        for i in range(n):
            words = rng.sample(FILLER, 6) + [rng.choice(POSITIVE if i % 2 else NEGATIVE)]
            rng.shuffle(words)
            out.append(f"{' '.join(words)} \t{i % 2}")
        return "sentence\tlabel\n" + "\n".join(out) + "\n"

    (root / "sst2").mkdir(parents=True)
    (root / "sst2" / "train.tsv").write_text(rows(n_train))
    (root / "sst2" / "dev.tsv").write_text(rows(n_dev))
    return root


def command(model: str, data: Path, out: Path, n_train: int, n_eval: int, port: int) -> list[str]:
    return ["accelerate", "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
            "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(port),
            "-m", "berteval", "run", "--task", "sst2", "--regime", "finetune", "--model", model,
            "--pooling", "cls,mean", "--seeds", "0", "--data-dir", str(data), "--out", str(out),
            "--limit-train", str(n_train), "--limit-eval", str(n_eval), "--epochs", "2", "--batch-size", "16",
            "--no-progress"]


def environment(cache: Path) -> dict:
    return {**os.environ, "BERTEVAL_CACHE": str(cache), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO),
            "TOKENIZERS_PARALLELISM": "false"}


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        out += [int(k) for k in kids]
        todo += [int(k) for k in kids]
    return out


def rank_of(pid: int) -> int | None:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    if b"berteval" not in cmd:
        return None
    for item in env:
        if item.startswith(b"RANK="):
            return int(item[5:])
    return None


def records(out: Path) -> list[dict]:
    path = out / "sst2.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def outcome(out: Path, rec: dict) -> tuple:
    """What a cell computed, to compare runs: what the trained weights decide (not the session's loss log)."""
    ft = rec["config"]["finetune"]
    proba = json.loads((out / rec["predictions_file"]).read_text())["proba"]
    return rec["metrics"], ft["heldout_accuracy_per_epoch"], ft["selected_epoch"], proba


def tail(log: Path, lines: int = 40) -> str:
    """Why a launch failed, from its log (the launcher's and both processes' stdout and stderr), indented: first
    the lines that name an error (berteval's `error: ...`, an exception's last line), since the launcher's own
    ChildFailedError report (~40 lines) comes last and would push a process's one-line error out of a plain
    tail; then the log's last lines. The log itself goes with the temp folder."""
    text = log.read_text(errors="replace").splitlines() if log.is_file() else ["(no log written)"]
    errors = [line for line in text if re.match(r"(error: |[\w.]*(Error|Exception): )", line)
              and "ChildFailedError" not in line]
    shown = (errors + ["..."] if errors else []) + text[-lines:]
    return "\n".join("    | " + line for line in shown)


def run(cmd: list[str], env: dict, log: Path) -> tuple[int, float]:
    t0 = time.perf_counter()
    with open(log, "a") as fh:
        code = subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, cwd=REPO).returncode
    return code, time.perf_counter() - t0


def killed_run(cmd: list[str], env: dict, cache: Path, rank: int, log: Path) -> dict:
    """Start the launch, SIGKILL `rank`'s process once a checkpoint exists, wait for the launcher to end."""
    t0 = time.perf_counter()
    with open(log, "a") as fh:
        launcher = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, cwd=REPO)
    victim, at = None, None
    while launcher.poll() is None:
        if list((cache / "checkpoints").glob("*/state/progress.json")):
            victim = next((p for p in descendants(launcher.pid) if rank_of(p) == rank), None)
            if victim is not None:
                at = json.loads(next((cache / "checkpoints").glob("*/state/progress.json")).read_text())["step"]
                os.kill(victim, signal.SIGKILL)
                break
        time.sleep(0.02)
    try:
        code = launcher.wait(timeout=300)
        stopped = True
    except subprocess.TimeoutExpired:  # the peer hangs in a collective and the launcher never notices
        stopped = False
        for p in descendants(launcher.pid):
            os.kill(p, signal.SIGKILL)
        launcher.kill()
        code = launcher.wait()
    survivors = [p for p in descendants(launcher.pid)]
    return {"victim": victim, "checkpoint_step": at, "launcher_exit": code, "launcher_stopped_the_peer": stopped,
            "survivors": survivors, "seconds": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default", help="'default' (with --data-dir) or 'tiny' (generated data)")
    # Where CI and every real-data test read it: $BERTEVAL_DATA, else ../shared/data beside the clone. (The
    # second alone failed in a clone with the data elsewhere: every process stopped on a missing --data-dir.)
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="the folder holding sst2/ (default $BERTEVAL_DATA, else ../shared/data beside the clone)")
    parser.add_argument("--train", type=int, default=400, help="training sentences (default 400; 10%% held out)")
    parser.add_argument("--eval", type=int, default=200, help="dev sentences scored (default 200)")
    parser.add_argument("--keep", type=Path, default=None, help="work in this folder and keep it (default: a temp one)")
    args = parser.parse_args(argv)

    root = args.keep or Path(tempfile.mkdtemp(prefix="accelerate-check-"))
    root.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    try:
        if args.model == "tiny":
            from conftest import save_tiny

            model, data = str(save_tiny(root / "model", "pretraining")), tiny_data(root / "data", args.train, args.eval)
        else:
            from berteval.config import local_data_dir

            model, data = args.model, args.data_dir or local_data_dir()
            if data is None or not (data / "sst2" / "train.tsv").is_file():
                where = (f"{data} holds no sst2/train.tsv" if data else
                         "no --data-dir, and neither $BERTEVAL_DATA nor ../shared/data beside the clone is a folder")
                print(f"no SST-2 data: {where} (pass --data-dir, set BERTEVAL_DATA, or use --model tiny)")
                return 2
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores; "
              f"logs under {root}")
        results = {}
        for i, name in enumerate(("straight", "kill rank 0", "kill rank 1")):
            folder = root / name.replace(" ", "-")
            out, cache, log = folder / "out", folder / "cache", folder / "log.txt"
            out.mkdir(parents=True)
            cmd, env = command(model, data, out, args.train, args.eval, 29500 + 10 * i), environment(cache)
            if name == "straight":
                code, secs = run(cmd, env, log)
                print(f"{name}: exit {code} in {secs:.1f} s")
                if code != 0:
                    print(f"{name}: the end of its log ({log}):\n{tail(log)}")
                    failures.append(f"{name}: exit {code}")
                    break  # the kill runs need a launch that works
            else:
                kill = killed_run(cmd, env, cache, int(name[-1]), log)
                print(f"{name}: SIGKILL pid {kill['victim']} (checkpoint at step {kill['checkpoint_step']} on disk); "
                      f"launcher exit {kill['launcher_exit']} after {kill['seconds']:.1f} s, "
                      f"{'stopped the other process' if kill['launcher_stopped_the_peer'] else 'HUNG: killed by hand'}"
                      f"; records before the rerun: {len(records(out))}")
                if kill["victim"] is None:
                    failures.append(f"{name}: the run finished before a checkpoint was seen (use more --train)")
                if not kill["launcher_stopped_the_peer"]:
                    failures.append(f"{name}: the launcher did not stop the surviving process")
                code, secs = run(cmd, env, log)
                print(f"{name}: rerun exit {code} in {secs:.1f} s")
                if code != 0:
                    print(f"{name}: the end of its log ({log}):\n{tail(log)}")
                    failures.append(f"{name}: rerun exit {code}")
            recs = records(out)
            results[name] = recs
            ids = [r["run_id"] for r in recs]
            for r in recs:
                ft = r["config"]["finetune"]
                print(f"  {r['pooling']}: accuracy {r['metrics']['accuracy']:.4f}, processes {r['config'].get('processes')}, "
                      f"steps {ft['steps']}, resumed_from_step {ft['resumed_from_step']}, held-out per epoch "
                      f"{ft['heldout_accuracy_per_epoch']}, loss {ft['first_loss']} -> {ft['last_loss']} (this session), "
                      f"train {ft['train_wall_s']} s, run_id {r['run_id']}")
            if len(recs) != 2 or len(set(ids)) != 2:
                failures.append(f"{name}: {len(recs)} records for {len(set(ids))} run ids (want 2 and 2)")
            if any(r["config"].get("processes") != 2 for r in recs):
                failures.append(f"{name}: a record does not say processes 2")
        straight = {r["run_id"]: outcome(root / "straight" / "out", r) for r in results.get("straight", [])}
        for name in [n for n in ("kill rank 0", "kill rank 1") if n in results]:  # none after a failed launch
            resumed = [r for r in results[name] if r["config"]["finetune"]["resumed_from_step"] > 0]
            if not resumed:
                failures.append(f"{name}: no record resumed from a checkpoint")
            folder = root / name.replace(" ", "-") / "out"
            same = all(straight.get(r["run_id"]) == outcome(folder, r) for r in results[name])
            print(f"{name}: {'identical to' if same else 'DIFFERENT from'} the uninterrupted run, cell by cell "
                  f"(metrics, held-out accuracy per epoch, selected epoch, every dev probability)")
            if not same:
                failures.append(f"{name}: results differ from the uninterrupted run")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    for f in failures:
        print(f"FAILED: {f}")
    print("all checks passed" if not failures else f"{len(failures)} checks failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
