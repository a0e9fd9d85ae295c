"""Inside BERT, on one input: what `last_hidden_state` and `pooler_output` are, in numbers, and the heads on them.

The app's "Inside BERT" tab shows the two outputs' shapes, recomputes `pooler_output` by
hand as tanh(W·h_[CLS] + b) from the pooler's own weights (and shows that it matches the
model's, to float precision), and says how far apart the three vectors a classifier
could read are (cosine of `cls`, `pooler`, `mean`), next to what the checkpoint's
pooler is (pretrained, never trained, random, absent).

Then the heads the seed question is about, each with its weight shapes: the span-QA head
(`Linear(H, 2)` on every token: a start and an end logit per token, from the served QA head),
the NSP head (`Linear(H, 2)` on `pooler_output`: two logits, IsNext and NotNext, recomputed by
hand), and where the checkpoint has one the masked-LM head (BERT's other pre-training head: a
transform, then a decoder tied to the word embeddings), with its top predictions for each
`[MASK]` in the text. A head the checkpoint lacks is named with the reason, never run at random.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .. import devices, models, pooling
from .reading import Reading, measure

TOP_K = 5  # predictions shown per [MASK]
MAX_MASKS = 3  # [MASK] positions shown


@dataclass
class QAHeadView:
    """The span head's two logits for every token of the input, read as one segment."""

    source: str  # which QA model answered, in words
    weight_shape: tuple[int, ...]  # (2, H)
    bias_shape: tuple[int, ...]  # (2,)
    tokens: list[str]
    start_logits: list[float]  # (T,)
    end_logits: list[float]  # (T,)


@dataclass
class NSPHeadView:
    weight_shape: tuple[int, ...]  # (2, H)
    bias_shape: tuple[int, ...]  # (2,)
    logits: tuple[float, float]  # (IsNext, NotNext)
    p_is_next: float
    by_hand_max_abs_diff: float  # |pooler_output @ W.T + b - the model's logits|


@dataclass
class MLMHeadView:
    shapes: dict[str, tuple[int, ...]]  # the transform and the decoder
    predictions: list[tuple[int, list[tuple[str, float]]]]  # per [MASK] position: the top tokens and P
    mask_token: str


@dataclass
class InsideReport:
    model_id: str
    tokens: list[str]
    last_hidden_state_shape: tuple[int, ...]  # (1, T, H)
    pooler_output_shape: tuple[int, ...] | None  # (1, H); None where the architecture has no pooler
    pooler_by_hand_max_abs_diff: float | None  # |tanh(W h_CLS + b) - pooler_output|, max over H
    pooler_formula: str  # what "by hand" computed, or why it could not
    cosine: dict[tuple[str, str], float] = field(default_factory=dict)  # over the pairs of cls/pooler/mean
    norms: dict[str, float] = field(default_factory=dict)  # L2 norm of each vector
    pooler_provenance: str = ""
    reading: Reading | None = None  # how much of the input was read (cut at max_length)
    qa_head: QAHeadView | None = None
    nsp_head: NSPHeadView | None = None
    mlm_head: MLMHeadView | None = None
    absent: dict[str, str] = field(default_factory=dict)  # {"qa" | "nsp" | "mlm": why that head is not shown}


def _cos(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a, b, dim=-1)[0])


@torch.inference_mode()
def look_inside(model: models.LoadedModel, text: str, max_length: int = 128, qa=None, mlm=None) -> InsideReport:
    """`qa`: the QA model to show (a QAModel) or why there is none (a string); `mlm`: the checkpoint's masked-LM
    model (see `mlm_model`) or why there is none. Neither given: those heads are not reported."""
    enc = devices.to(dict(model.tokenizer(text, truncation=True, max_length=max_length, return_tensors="pt")))
    out = model.encoder(**enc)
    hidden = out.last_hidden_state  # (1, T, H)
    vectors = {name: pooling.apply(name, hidden, enc["attention_mask"], model.encoder) for name in ("cls", "mean")}  # (1, H)
    pooled = getattr(out, "pooler_output", None)  # (1, H) or None (DistilBERT has no pooler)
    diff, formula = None, f"{model.model_id} has no pooler layer, so there is no pooler_output to recompute"
    dense = getattr(getattr(model.encoder, "pooler", None), "dense", None)
    if pooled is not None and isinstance(dense, torch.nn.Linear):
        # BERT's pooler: one Linear on the first token's final state, then tanh.
        by_hand = torch.tanh(hidden[:, 0] @ dense.weight.T + dense.bias)  # (1, H)
        diff = float((by_hand - pooled).abs().max())
        formula = f"tanh(W·h_[CLS] + b) with W {tuple(dense.weight.shape)} and b {tuple(dense.bias.shape)}"
    elif pooled is not None:
        formula = f"{type(model.encoder.pooler).__name__} is not a Linear + tanh pooler; not recomputed"
    if pooled is not None:
        vectors = {"cls": vectors["cls"], "pooler": pooled, "mean": vectors["mean"]}
    names = list(vectors)
    cosine = {(a, b): _cos(vectors[a], vectors[b]) for i, a in enumerate(names) for b in names[i + 1:]}
    absent: dict[str, str] = {}
    qa_view = _qa_view(qa, text, max_length) if qa is not None and not isinstance(qa, str) else None
    if isinstance(qa, str):
        absent["qa"] = qa
    nsp_view = _nsp_view(model, enc, pooled) if model.nsp_model is not None and pooled is not None else None
    if nsp_view is None:
        absent["nsp"] = (f"{model.model_id} has no trained next-sentence head (transformers would attach a random "
                         f"one), so there is nothing real to show")
    mlm_view = _mlm_view(mlm, model.tokenizer, enc) if mlm is not None and not isinstance(mlm, str) else None
    if isinstance(mlm, str):
        absent["mlm"] = mlm
    report = InsideReport(
        model_id=model.model_id,
        tokens=model.tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist()),
        last_hidden_state_shape=tuple(hidden.shape),
        pooler_output_shape=tuple(pooled.shape) if pooled is not None else None,
        pooler_by_hand_max_abs_diff=diff,
        pooler_formula=formula,
        cosine=cosine,
        norms={n: float(v.norm()) for n, v in vectors.items()},
        pooler_provenance=model.heads.pooler_provenance,
        reading=measure(model.tokenizer, text, max_length),
        qa_head=qa_view, nsp_head=nsp_view, mlm_head=mlm_view, absent=absent,
    )
    return report


def _qa_view(qa, text: str, max_length: int) -> QAHeadView | None:
    """The span head's start and end logit of every token of `text`, fed alone ([CLS] text [SEP])."""
    head = getattr(qa.model, "qa_outputs", None)
    if not isinstance(head, torch.nn.Linear):
        return None
    enc = devices.to(dict(qa.tokenizer(text, truncation=True, max_length=max_length, return_tensors="pt")))
    out = qa.model(**enc)
    return QAHeadView(qa.source, tuple(head.weight.shape), tuple(head.bias.shape),
                      qa.tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist()),
                      out.start_logits[0].float().cpu().tolist(), out.end_logits[0].float().cpu().tolist())


def _nsp_view(model: models.LoadedModel, enc: dict, pooled: torch.Tensor) -> NSPHeadView:
    """The NSP head on this input's `pooler_output`, and the same two logits recomputed by hand."""
    head = model.nsp_model.cls.seq_relationship  # Linear(H, 2): index 0 = IsNext
    logits = model.nsp_model(**enc).logits[0].float()  # (2,)
    by_hand = (pooled @ head.weight.T + head.bias)[0].float()  # (1, H) @ (H, 2)
    p = torch.softmax(logits, dim=-1)
    return NSPHeadView(tuple(head.weight.shape), tuple(head.bias.shape), (float(logits[0]), float(logits[1])),
                       float(p[0]), float((by_hand - logits).abs().max()))


def _mlm_view(mlm, tokenizer, enc: dict) -> MLMHeadView:
    """Top predictions of the masked-LM head at each [MASK] of the input (none typed: none shown)."""
    mask_id = tokenizer.mask_token_id
    ids = enc["input_ids"][0]
    positions = [int(i) for i in (ids == mask_id).nonzero().flatten()][:MAX_MASKS] if mask_id is not None else []
    preds = mlm.cls.predictions
    shapes = {"transform.dense.weight": tuple(preds.transform.dense.weight.shape),
              "decoder.weight (tied to the word embeddings)": tuple(preds.decoder.weight.shape),
              "bias": tuple(preds.bias.shape)}
    found = []
    if positions:
        logits = mlm(**{k: v for k, v in enc.items() if k in ("input_ids", "attention_mask", "token_type_ids")}).logits
        for pos in positions:
            p = torch.softmax(logits[0, pos].float(), dim=-1)  # (V,)
            top = torch.topk(p, TOP_K)
            found.append((pos, [(tokenizer.convert_ids_to_tokens(int(i)), float(v))
                                for v, i in zip(top.values, top.indices)]))
    return MLMHeadView(shapes, found, tokenizer.mask_token or "[MASK]")


def mlm_model(name: str, loaded: models.LoadedModel):
    """The checkpoint's masked-LM model (*ForMaskedLM) with its trained head, or why there is none (a string).
    A derived encoder's MLM head comes from its committed heads file (`default+mlm-nsp` stores the transform and
    the bias; the decoder is tied to the word embeddings)."""
    from transformers import AutoModelForMaskedLM

    no_head = (f"{loaded.model_id} has no masked-LM head in its checkpoint (transformers would attach a random "
               f"one): it was not trained by BERT's masked-word objective, or that head was not kept")
    try:
        model, missing = models.load_with_head(loaded, AutoModelForMaskedLM)
    except ValueError:  # transformers has no masked-LM class for this architecture: no such head to show
        return no_head
    if not isinstance(getattr(getattr(model, "cls", None), "predictions", None), torch.nn.Module):
        return no_head
    spec = models.derived.parse(name) if loaded.derived_from is not None else None
    if spec is not None:
        if models.derived.HEADS_FILE not in spec.variant.artifacts:
            return no_head
        from safetensors.torch import load_file

        folder, _ = models.derived.verified_record(spec)
        tensors = load_file(str(folder / models.derived.HEADS_FILE))
        if not set(models.derived.MLM_KEYS) <= set(tensors):
            return no_head
        own = model.state_dict()
        with torch.no_grad():
            for key in models.derived.MLM_KEYS:
                own[key].copy_(tensors[key])
        missing = [k for k in missing if k not in models.derived.MLM_KEYS and k != "cls.predictions.decoder.bias"]
    if any(k.startswith("cls.predictions") for k in missing):
        return no_head
    return model.eval()
