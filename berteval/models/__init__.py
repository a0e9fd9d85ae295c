"""Models: one loader for the embedded default, a local folder, a hub id and the encoders
berteval derives from them, plus the report of which heads a checkpoint really has.

`identify` names a model (canonical id and revision) without loading its weights, so a
rerun of finished cells can be recognised before any model is loaded; `load` returns the
encoder, its fast tokenizer and the head report.
"""

from . import derived, pretrained
from .loading import (DEFAULT, DEFAULT_MODEL_ID, DEFAULT_PACKAGE, HUB_ONLY, POOLER_KINDS, HeadReport, HubUnavailable,
                      Identity, LoadedModel, default_model_path, identify, is_public_hub_id, load, load_with_head,
                      quiet_loader)

__all__ = ["DEFAULT", "DEFAULT_MODEL_ID", "DEFAULT_PACKAGE", "HUB_ONLY", "POOLER_KINDS", "HeadReport",
           "HubUnavailable", "Identity", "LoadedModel", "default_model_path", "derived", "identify",
           "is_public_hub_id", "load", "load_with_head", "pretrained", "quiet_loader"]
