"""`<base>+mlm-nsp`: continued pre-training with BERT's own objective, masked LM + NSP.

Reference shape: `transformers.BertForPreTraining` on the base checkpoint. The heads the
checkpoint lacks (the MLM transform and output bias, the NSP head) start from
transformers' usual initialisation under the run's seed; the MLM decoder is tied to the
word embeddings, as in BERT. The loss is BERT's: the mean cross-entropy over the masked
positions plus the NSP cross-entropy. Unlike `BertForPreTraining.forward`, the vocabulary
projection is applied only at the masked positions (about 15% of tokens): the same loss,
with a fifth of the decoder's cost (on 2 CPU cores the 30,522-wide decoder over every token
costs about as much as the encoder).

What trains, and why LoRA rather than every weight: a LoRA adapter (rank `rank`) on every
linear layer of the encoder (query, key, value, attention output, intermediate, output of
all layers), plus, in full, the pooler, the NSP head and the MLM head's transform and
output bias. Embeddings and the (tied) decoder stay frozen. Two reasons:
- the artifacts must be committed, each under 5 MiB: a full copy of the encoder is ~90 MB,
  the adapter ~2.7 MB at rank 16 and the heads ~1.3 MB;
- it is cheaper on 2 CPU cores (no weight gradients or optimiser state for the 22M frozen
  weights), and with 17 articles of text a low-rank update is also the safer amount of
  freedom.
At load time the adapter is merged into the encoder's weights (`berteval.models.derived`),
so every consumer sees a plain BertModel.

Budget (the defaults in `berteval.derive.RECIPES`): one optimiser step (32 sequences of up to
128 tokens, fp32) costs about 5 core-seconds on this CPU (no AVX512-BF16 or AMX, so bf16 would
be slower, not faster). 20 passes over the 17 articles (BERT's dupe factor: each pass cut into
pairs and masked afresh, every sequence seen once) are about 10,400 x 2 sequences, ~650 steps,
about an hour on one core. lr 5e-4 (LoRA and the fresh heads alike), 5% warm-up then linear
decay, weight decay 0.01 and clipping at 1.0 as in BERT, dropout 0.1 as in the checkpoint.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch

from .. import models, training
from ..models import derived
from ..models.base import save_peft
from .base import Context, Outcome
from .examples import masked_sequences, segment_pairs
from ..pretrain.masking import IGNORE, MaskingRule
from .steplog import StepLog

# Linear layers of the encoder stack only (not the pooler, not the heads: those train in full).
LORA_TARGETS = (r".*encoder\.layer\.\d+\.(attention\.self\.(query|key|value)|attention\.output\.dense"
                r"|intermediate\.dense|output\.dense)")


class PretrainingObjective(torch.nn.Module):
    """BERT's pre-training loss on a (LoRA-wrapped) BertForPreTraining, returning its parts too."""

    def __init__(self, peft_model: torch.nn.Module):
        super().__init__()
        self.model = peft_model

    @property
    def pretraining(self) -> torch.nn.Module:
        """The BertForPreTraining inside the peft wrapper (its linear layers carry the LoRA weights)."""
        return self.model.get_base_model()

    def forward(self, input_ids, token_type_ids, attention_mask, mlm_labels, nsp_labels) -> dict:
        inner = self.pretraining
        out = inner.bert(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask)
        masked = mlm_labels != IGNORE  # (B, T)
        mlm_logits = inner.cls.predictions(out.last_hidden_state[masked])  # (M, V): masked positions only
        nsp_logits = inner.cls.seq_relationship(out.pooler_output)  # (B, 2)
        targets = mlm_labels[masked]
        mlm_loss = torch.nn.functional.cross_entropy(mlm_logits.float(), targets)
        nsp_loss = torch.nn.functional.cross_entropy(nsp_logits.float(), nsp_labels)
        return {"loss": mlm_loss + nsp_loss, "mlm_loss": mlm_loss.detach(), "nsp_loss": nsp_loss.detach(),
                "mlm_accuracy": (mlm_logits.argmax(-1) == targets).float().mean().detach(),
                "nsp_accuracy": (nsp_logits.argmax(-1) == nsp_labels).float().mean().detach()}


def pretraining_model(base_path: str, seed: int, hyper: dict) -> torch.nn.Module:
    """BertForPreTraining from the base (missing heads initialised under `seed`), LoRA-wrapped,
    with exactly the LoRA weights, pooler, NSP head and MLM transform/bias trainable."""
    from peft import LoraConfig, get_peft_model
    from transformers import BertForPreTraining

    with models.quiet_loader(), torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # peft asks transformers a deprecated question
        torch.manual_seed(int(seed))
        model = BertForPreTraining.from_pretrained(base_path, local_files_only=True)
        lora = LoraConfig(r=hyper["rank"], lora_alpha=hyper["alpha"], lora_dropout=hyper["lora_dropout"],
                          target_modules=LORA_TARGETS)
        peft_model = get_peft_model(model, lora)
    trainable = ("bert.pooler.", "cls.seq_relationship.", "cls.predictions.transform.", "cls.predictions.bias")
    for name, param in peft_model.get_base_model().named_parameters():
        if name.startswith(trainable) and "decoder.weight" not in name:
            param.requires_grad_(True)
    return peft_model


def collate(rows: list[dict]) -> dict:
    width = max(len(r["input_ids"]) for r in rows)
    batch = {"input_ids": torch.zeros(len(rows), width, dtype=torch.long),
             "token_type_ids": torch.zeros(len(rows), width, dtype=torch.long),
             "attention_mask": torch.zeros(len(rows), width, dtype=torch.long),
             "mlm_labels": torch.full((len(rows), width), IGNORE, dtype=torch.long)}
    for i, r in enumerate(rows):
        n = len(r["input_ids"])
        batch["input_ids"][i, :n] = torch.from_numpy(r["input_ids"])
        batch["token_type_ids"][i, :n] = torch.from_numpy(r["token_type_ids"])
        batch["attention_mask"][i, :n] = 1
        batch["mlm_labels"][i, :n] = torch.from_numpy(r["mlm_labels"])
    batch["nsp_labels"] = torch.tensor([r["nsp_label"] for r in rows], dtype=torch.long)
    return batch


def head_tensors(pretraining: torch.nn.Module) -> dict[str, torch.Tensor]:
    state = pretraining.state_dict()
    return {k: state[k].detach().contiguous().clone() for k in (*derived.POOLER_KEYS, *derived.NSP_KEYS,
                                                                *derived.MLM_KEYS)}


def save(objective: PretrainingObjective, stage: Path, base_model_id: str) -> dict[str, torch.Tensor]:
    """adapter_model.safetensors + adapter_config.json (peft) and heads.safetensors."""
    from safetensors.torch import save_file

    save_peft(objective.model, stage, base_model_id)
    heads = head_tensors(objective.pretraining)
    save_file(heads, str(stage / derived.HEADS_FILE))
    return heads


def run(ctx: Context, stage: Path) -> Outcome:
    from transformers import AutoTokenizer

    h = ctx.hyper
    base = models.identify(ctx.spec.base)
    tokenizer = AutoTokenizer.from_pretrained(base.path, local_files_only=True)
    objective = PretrainingObjective(pretraining_model(base.path, ctx.seed, h))
    pairs = segment_pairs(ctx, tokenizer, objective.pretraining.config.max_position_embeddings)
    rule = MaskingRule(max_predictions=h["max_predictions"])
    dataset, mask_stats = masked_sequences(pairs, tokenizer, rule, ctx.seed)

    ckpt = ctx.checkpoint_dir(base.revision, pairs.sha256, mask_stats["masked_sha256"])
    log = StepLog(ckpt)

    def loss_fn(m, batch):
        out = m(**batch)
        log.add(loss=out["loss"].detach(), **{k: out[k] for k in ("mlm_loss", "nsp_loss", "mlm_accuracy",
                                                                   "nsp_accuracy")})
        return out["loss"]

    epochs, total = ctx.schedule(len(dataset))
    cfg = training.TrainConfig(epochs=epochs, batch_size=h["batch_size"], lr=h["lr"],
                               warmup_ratio=h["warmup_ratio"], weight_decay=h["weight_decay"],
                               max_grad_norm=h["max_grad_norm"], seed=ctx.seed, dtype=ctx.dtype, checkpoint_dir=ckpt,
                               checkpoint_every=50, stop_after_steps=ctx.stop_after_steps)
    lengths = [len(r["input_ids"]) for r in dataset]
    # Dropout draws from the global generator: seed it for this run only (a resumed run gets the
    # checkpoint's state from accelerate), so the weights do not depend on what ran before in the process.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(ctx.seed)
        result = training.train(objective, dataset, collate, loss_fn, cfg, progress=ctx.progress, lengths=lengths)
    if result.steps < total:
        return Outcome(False, result.steps, total, checkpoint=ckpt)

    objective.eval()
    tensors = save(objective, stage, base.model_id)
    lora = {k: v for k, v in objective.model.state_dict().items() if "lora_" in k}
    trainable = sum(p.numel() for p in objective.parameters() if p.requires_grad)
    train_record = {**log.summary(), "steps": result.steps, "steps_total": total,
                    "examples_seen_this_run": result.examples_seen, "trainable_parameters": trainable,
                    "lora_targets": LORA_TARGETS, "lora_tensors": len(lora),
                    "accuracy_note": "mlm_accuracy / nsp_accuracy: running training accuracy (train mode, dropout on)",
                    "head_init": "MLM transform/bias and NSP head: transformers' initialisation under the seed; "
                                 "decoder tied to the word embeddings; pooler from the base checkpoint"}
    return Outcome(True, result.steps, total, {**pairs.record, "masking": mask_stats, "training": train_record},
                   {**tensors, **{f"lora:{k}": v.detach().clone() for k, v in lora.items()}}, ckpt)
