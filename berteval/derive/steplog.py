"""Per-step training metrics that survive a kill, and their summary for the derivation record.

`training.train` keeps only this process's losses; a derivation resumed from a checkpoint
must still report its first loss. Every step appends one line to `<checkpoint>/steps.jsonl`;
on resume the lines after the checkpoint's step (steps that will be trained again) are
dropped, so the log always holds each step once.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from .. import training


class StepLog:
    def __init__(self, folder: Path | None):
        self.file = folder / "steps.jsonl" if folder is not None else None
        self.rows: list[dict] = []
        resumed = 0
        step = training.checkpoint_step(folder)  # the step training.train will resume this folder from
        if step and self.file.is_file():
            resumed = step
            rows = [json.loads(line) for line in self.file.read_text().splitlines() if line.strip()]
            self.rows = [r for r in rows if r["step"] <= resumed]
        if self.file is not None:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            self.file.write_text("".join(json.dumps(r) + "\n" for r in self.rows))
        self.resumed_from = resumed
        self.step = resumed
        self._wall0 = self.rows[-1]["wall_s"] if self.rows else 0.0
        self._t0 = time.perf_counter()

    def add(self, **metrics: float) -> None:
        self.step += 1
        row = {"step": self.step, "wall_s": round(self._wall0 + time.perf_counter() - self._t0, 3),
               **{k: round(float(v), 6) for k, v in metrics.items()}}
        self.rows.append(row)
        if self.file is not None:
            with open(self.file, "a") as fh:
                fh.write(json.dumps(row) + "\n")

    def summary(self, points: int = 50) -> dict:
        """First/last/mean of every metric, means over the first and last tenth of the steps, and a
        curve of `points` means (one per equal slice of steps) for plotting."""
        if not self.rows:
            return {"steps": 0}
        keys = [k for k in self.rows[0] if k not in ("step", "wall_s")]
        tenth = max(1, len(self.rows) // 10)
        out: dict = {"steps": len(self.rows), "train_wall_s": self.rows[-1]["wall_s"],
                     "resumed_from_step": self.resumed_from}
        for k in keys:
            v = np.array([r[k] for r in self.rows], dtype=np.float64)
            out[k] = {"first": round(v[0], 4), "last": round(v[-1], 4), "mean": round(v.mean(), 4),
                      "first_10pct_mean": round(v[:tenth].mean(), 4), "last_10pct_mean": round(v[-tenth:].mean(), 4)}
        edges = np.linspace(0, len(self.rows), min(points, len(self.rows)) + 1).astype(int)
        out["curve"] = {"step": [int(self.rows[e - 1]["step"]) for e in edges[1:]],
                        **{k: [round(float(np.mean([r[k] for r in self.rows[a:b]])), 4)
                               for a, b in zip(edges[:-1], edges[1:])] for k in keys}}
        return out
