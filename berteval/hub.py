"""Is the Hugging Face Hub reachable from here? Asked once with one TCP connection.

The hub clients (transformers, datasets) retry a failed request for tens of seconds before
giving up: on an offline machine, `run --task sst2` without `--data-dir` spent 28-35 s
retrying before its error. Model loading and data loading ask this first instead, and
where the hub is not reachable they read the local caches only (`offline()`), which
answers at once: the cached copy, or an error that says what to do.
"""

from __future__ import annotations

import contextlib
import socket
import sys
from urllib.parse import urlparse


def reachable(timeout: float = 3.0) -> bool:
    """A cheap TCP probe of the hub's endpoint (False at once where HF_HUB_OFFLINE=1)."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    host = urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def offline():
    """Within: the hub clients read their local caches only. Both read HF_HUB_OFFLINE once, at import,
    so their module-level copies are switched (and switched back)."""
    from huggingface_hub import constants

    switched = [(constants, "HF_HUB_OFFLINE")]
    if "datasets" in sys.modules:
        switched.append((sys.modules["datasets"].config, "HF_HUB_OFFLINE"))
    before = [getattr(mod, name) for mod, name in switched]
    try:
        for mod, name in switched:
            setattr(mod, name, True)
        yield
    finally:
        for (mod, name), value in zip(switched, before):
            setattr(mod, name, value)


# What a model needs from a hub repository: configs, vocabularies, weights as safetensors (a repository
# that has only pytorch_model.bin gets it in a second pass). Not TF, Flax or ONNX copies.
MODEL_FILES = ("*.json", "*.txt", "*.model", "*.safetensors")


def model_snapshot(repo_id: str, revision: str | None = None, local_only: bool = False):
    """The local folder of `repo_id`'s files in the hub cache (downloaded unless `local_only`). A hub id is
    resolved here, never by transformers, which would read a folder of the working directory that happens to
    share the id's name. Raises huggingface_hub's errors (not cached offline, no such repository)."""
    from pathlib import Path

    from huggingface_hub import snapshot_download

    path = Path(snapshot_download(repo_id, revision=revision, allow_patterns=list(MODEL_FILES),
                                  local_files_only=local_only))
    if not any(path.glob("*.safetensors")):
        path = Path(snapshot_download(repo_id, revision=revision, allow_patterns=[*MODEL_FILES, "pytorch_model.bin"],
                                      local_files_only=local_only))
    return path
