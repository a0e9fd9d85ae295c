"""The app's span-QA model: for the embedded default, the best committed fine-tuned adapter
(chosen by the store's one rule, by dev F1); for any other checkpoint, its own trained QA
head, refused where transformers would attach a random one."""

from __future__ import annotations

from .. import models
from ..errors import BertevalError
from ..qa.inference import QAModel, head_model, load_adapter
from ..store import Store
from ..tasks import get


def demo_model(name: str = models.DEFAULT, store: Store | None = None) -> QAModel:
    if name != models.DEFAULT:
        loaded = models.load(name)
        return QAModel(head_model(loaded, require_pretrained=True), loaded.tokenizer,
                       f"pretrained QA head of {loaded.model_id}")
    store = store or Store()
    ident = models.identify(name)
    task = get("squad")
    found = store.best(task.name, model_id=ident.model_id, revision=ident.revision, version=task.version,
                       regime="finetune", artifact="adapter_dir")
    if found is None:
        raise BertevalError(f"no committed SQuAD adapter for {ident.model_id} under {store.root}; run: python -m "
                            f"berteval run --task squad --regime finetune --seeds 0 --data-dir ../shared/data")
    return load_adapter(found.path)
