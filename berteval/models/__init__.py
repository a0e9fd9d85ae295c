"""Models: one loader for the embedded default, a local folder, a hub id and the encoders
berteval derives from them, plus the report of which heads a checkpoint really has.

`identify` names a model (canonical id and revision) without loading its weights, so a
rerun of finished cells can be recognised before any model is loaded; `load` returns the
encoder, its fast tokenizer and the head report. Importing this package is light: the
loader (`loading`, which imports torch and transformers) is imported the first time one of
its names is read, so light commands may name models (`pretrained`, `derived`, `twins`, `DEFAULT`)
without the deep-learning stack.
"""

from . import derived, pretrained, twins
from .base import DEFAULT, DEFAULT_MODEL_ID, quiet_loader

_LOADING = ("DEFAULT_PACKAGE", "HUB_ONLY", "POOLER_KINDS", "HeadReport", "HubUnavailable",
            "Identity", "LoadedModel", "default_model_path", "identify", "is_public_hub_id", "load", "load_with_head")


def __getattr__(name: str):
    if name in _LOADING:
        from . import loading

        return getattr(loading, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DEFAULT", "DEFAULT_MODEL_ID", "DEFAULT_PACKAGE", "HUB_ONLY", "POOLER_KINDS", "HeadReport",
           "HubUnavailable", "Identity", "LoadedModel", "default_model_path", "derived", "identify",
           "is_public_hub_id", "load", "load_with_head", "pretrained", "quiet_loader", "twins"]
