"""Writing a derived encoder: its artifact files and `derivation.json`, the provenance record.

Files are written into a staging folder beside the final one, each checked against the
5 MiB limit for committed files, hashed, listed in the record, and the folder is swapped
into place only when complete, so a kill never leaves half an encoder that the loader
would accept. The record holds everything needed to judge and rerun the derivation.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
from pathlib import Path

from .. import provenance
from ..errors import BertevalError
from ..models import derived
from .base import Context, Outcome

SCHEMA = 1
MAX_BYTES = 5 * 1024 * 1024  # every committed artifact stays under 5 MiB


def staging(folder: Path) -> Path:
    stage = folder.with_name(folder.name + ".partial")
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    return stage


def _files(stage: Path) -> dict[str, dict]:
    files = {}
    for path in sorted(stage.iterdir()):
        if path.name == derived.RECORD:
            continue
        size = path.stat().st_size
        if size >= MAX_BYTES:
            raise BertevalError(f"artifact {path.name} is {size / 2**20:.1f} MiB: committed artifacts must stay under "
                                f"5 MiB (lower --rank?)")
        files[path.name] = {"sha256": derived.file_sha256(path), "bytes": size}
    return files


def record(ctx: Context, objective: str, base, outcome: Outcome, files: dict) -> dict:
    from .. import devices, precision

    spec = ctx.spec
    device = devices.current()  # the one this derivation ran on (`derive --device`), not always the CPU
    # Off the CPU the record also says what precision the training ran in (a GPU without bf16 runs
    # --dtype bf16 as fp16 autocast with a gradient scaler); CPU records keep their fields.
    ran = {} if device.type == "cpu" else {"precision": precision.describe(ctx.dtype, precision.MIXED)}
    return {
        "schema": SCHEMA,
        "name": spec.name,
        "variant": spec.variant.suffix,
        "summary": spec.variant.summary,
        "model_id": f"{base.model_id}+{spec.variant.suffix}",
        "base": {"name": spec.base, "model_id": base.model_id, "revision": base.revision},
        "objective": objective,
        "command": ctx.command,
        "seed": ctx.seed,
        "dtype": ctx.dtype,
        "hyperparameters": ctx.hyper,
        **outcome.record,
        "artifacts": {"files": files, "sha256": derived.artifacts_sha256(files)},
        "versions": provenance.versions(),
        "git_commit": provenance.git_commit(),
        "device": devices.describe(device),
        **ran,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def publish(ctx: Context, objective: str, base, outcome: Outcome, stage: Path, folder: Path) -> dict:
    """Hash the staged files, write the record, and swap the staging folder into place."""
    files = _files(stage)
    rec = record(ctx, objective, base, outcome, files)
    (stage / derived.RECORD).write_text(json.dumps(rec, indent=1) + "\n")
    old = folder.with_name(folder.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        os.replace(folder, old)
    os.replace(stage, folder)
    shutil.rmtree(old, ignore_errors=True)
    return rec
