"""What the model modules share below the loader: the embedded default's name and the quiet load.

`loading` (every way a model is found and loaded) and `derived` (encoders berteval derives
from a base) both read these; they live here, beneath both, so neither imports the other
back. Light: transformers is imported when a load is silenced, not before.
"""

from __future__ import annotations

import contextlib

DEFAULT = "default"  # `--model default`: the embedded all-MiniLM-L6-v2 (berteval.models.loading)


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
