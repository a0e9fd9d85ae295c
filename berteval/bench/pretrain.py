"""The pre-training step's speed: berteval's step against transformers' standard one, in one process.

Both train the same BERT (the twins' shape by default: 4 layers, hidden 256, vocabulary 8,192) on the same
batches: sequences of 128 tokens masked by transformers' `DataCollatorForLanguageModeling` (15%, 80/10/10),
with an NSP label each. The standard step is `BertForPreTraining(**batch, labels=..., next_sentence_label=...)`:
the vocabulary projection over every token. berteval's step (`berteval.pretrain.loop.Objective`) reads the
collator's labels and projects only the masked positions. Both run under bf16 autocast (fp32 master weights),
with AdamW and gradient clipping, interleaved round by round (the machine's load drifts); the median round is
reported. Model FLOPs utilisation = each step's own executed FLOPs (forward x 3: the backward pass costs twice
the forward) over its time, as a share of the best bf16 matmul throughput measured in the same process.
Examples: random ids of the vocabulary (speed does not depend on the text); say so beside the figures.
A third path is the second twins' step (the gen2 recipe, `RECIPES` in berteval.pretrain.command): the same
objective at the recipe's batch with dropout off.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

SHAPE = {"hidden_size": 256, "layers": 4, "heads": 4, "intermediate_size": 1024}
VOCAB = 8192


@dataclass
class StepTiming:
    path: str
    median_s: float
    tokens_per_s: float
    gflops: float
    mfu: float  # share of the measured bf16 matmul peak
    loss: float


def step_flops(config, batch: int, length: int, predicted: int) -> float:
    """Training FLOPs of one step: 3 x (encoder forward + the MLM head over `predicted` positions)."""
    from .encoders import encoder_flops

    h, v = config.hidden_size, config.vocab_size
    head = 2.0 * predicted * (h * h + h * v)  # transform dense + the (tied) decoder
    return 3.0 * (encoder_flops(config, [length] * batch) + head)


def _batches(tokenizer_vocab: int, n: int, batch: int, length: int, seed: int = 0):
    """`n` batches of collator-masked ids with NSP labels (the same for both paths)."""
    from transformers import BertTokenizerFast, DataCollatorForLanguageModeling

    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                          *(f"w{i}" for i in range(tokenizer_vocab - 5))])}
    tok = BertTokenizerFast(vocab=vocab)
    collator = DataCollatorForLanguageModeling(tok, mlm_probability=0.15, return_tensors="pt", seed=seed)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        ids = rng.integers(5, tokenizer_vocab, size=(batch, length))
        ids[:, 0], ids[:, length // 2], ids[:, -1] = tok.cls_token_id, tok.sep_token_id, tok.sep_token_id
        special = np.isin(ids, [tok.cls_token_id, tok.sep_token_id]).astype(np.int64)
        masked = collator.torch_call([{"input_ids": row.tolist(), "special_tokens_mask": s.tolist()}
                                      for row, s in zip(ids, special)])
        segment = torch.zeros(batch, length, dtype=torch.long)
        segment[:, length // 2 + 1:] = 1
        masked["token_type_ids"] = segment
        masked["attention_mask"] = torch.ones(batch, length, dtype=torch.long)
        masked["next_sentence_label"] = torch.from_numpy(rng.integers(0, 2, size=batch))
        out.append(masked)
    return tok, out


def measure(threads: int | None = None, batch: int = 32, length: int = 128, rounds: int = 5, steps: int = 3,
            log=print, shape: dict | None = None, vocab: int = VOCAB, big_batch: int | None = None) -> dict:
    """berteval's step (the first twins': batch `batch`, dropout 0.1), transformers' standard step on the same
    batches, and the gen2 recipe's step (batch `big_batch`, default the recipe's, no dropout), interleaved round
    by round."""
    from ..pretrain import loop
    from ..pretrain.command import RECIPES
    from .encoders import machine, matmul_peak

    if threads:
        torch.set_num_threads(threads)
    hyper = {**SHAPE, **(shape or {})}
    big_batch = big_batch or RECIPES["gen2"]["batch_size"]
    tok, batches = _batches(vocab, steps, batch, length)
    _, big = _batches(vocab, steps, big_batch, length, seed=1)
    batches_of = {"berteval": batches, "transformers": batches, "berteval gen2": big}
    peak = matmul_peak(torch.bfloat16)
    log(f"pretrain bench: bf16 matmul peak {peak:.0f} GFLOP/s; {torch.get_num_threads()} threads")

    def make(dropout: bool):
        model = loop.build_model(hyper, vocab, 0)
        if not dropout:  # the gen2 recipe's pre-training: no dropout (berteval.pretrain.loop.train)
            for module in model.modules():
                if isinstance(module, torch.nn.Dropout):
                    module.p = 0.0
        params = [p for p in model.parameters()]
        return model, params, torch.optim.AdamW(params, lr=1e-4)

    paths = {}
    for name in ("berteval", "transformers", "berteval gen2"):
        model, params, opt = make(dropout=name != "berteval gen2")
        model.train()
        objective = loop.Objective(model, True)

        def step(b, model=model, params=params, opt=opt, objective=objective, name=name):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                if name == "transformers":
                    out = model(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"],
                                attention_mask=b["attention_mask"], labels=b["labels"],
                                next_sentence_label=b["next_sentence_label"])
                    loss = out.loss
                else:
                    masked = b["labels"] != -100
                    rows, cols = masked.nonzero(as_tuple=True)
                    loss = objective(b["input_ids"], b["token_type_ids"], b["attention_mask"], rows, cols,
                                     b["labels"][masked], b["next_sentence_label"])["loss"]
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            return float(loss.detach())

        paths[name] = step
    for name, step in paths.items():  # warm-up: kernels chosen, optimiser state allocated
        step(batches_of[name][0])
    times = {name: [] for name in paths}
    losses = {name: 0.0 for name in paths}
    for _ in range(rounds):
        for name, step in paths.items():
            t0 = time.perf_counter()
            for b in batches_of[name]:
                losses[name] = step(b)
            times[name].append((time.perf_counter() - t0) / len(batches_of[name]))
    from transformers import BertConfig

    config = BertConfig(vocab_size=vocab, hidden_size=hyper["hidden_size"], num_hidden_layers=hyper["layers"],
                        intermediate_size=hyper["intermediate_size"])
    rows = []
    for name in paths:
        med = statistics.median(times[name])
        n = len(batches_of[name][0]["input_ids"])
        predicted = int(np.mean([int((b["labels"] != -100).sum()) for b in batches_of[name]]))
        flops = step_flops(config, n, length, predicted if name != "transformers" else n * length)
        rows.append(StepTiming(name, round(med, 4), round(n * length / med), round(flops / med / 1e9, 1),
                               round(flops / med / 1e9 / peak, 3), round(losses[name], 4)))
    ours, std, gen2 = rows
    predicted = int(np.mean([int((b["labels"] != -100).sum()) for b in batches]))
    return {"machine": machine(), "threads": torch.get_num_threads(), "peak_bf16_gflops": round(peak, 1),
            "batch": batch, "length": length, "vocab": vocab, "shape": hyper, "masked_per_batch": predicted,
            "examples": "random ids of the vocabulary, masked by DataCollatorForLanguageModeling (the same batches "
                        "for both paths)",
            "rows": [asdict(r) for r in rows], "speedup": round(ours.tokens_per_s / std.tokens_per_s, 2),
            "gen2_batch": big_batch, "gen2_speedup": round(gen2.tokens_per_s / ours.tokens_per_s, 2)}


def format_pretrain(res: dict) -> str:
    lines = [f"pre-training step, BERT {res['shape']['layers']} layers x {res['shape']['hidden_size']}, vocabulary "
             f"{res['vocab']:,}, batch {res['batch']} x {res['length']} tokens, bf16 autocast, {res['threads']} "
             f"threads; bf16 matmul peak {res['peak_bf16_gflops']:.0f} GFLOP/s",
             f"{'path':<14} {'s/step':>8} {'tokens/s':>9} {'GFLOP/s':>8} {'of peak':>8}"]
    for r in res["rows"]:
        lines.append(f"{r['path']:<14} {r['median_s']:>8.3f} {r['tokens_per_s']:>9,} {r['gflops']:>8.1f} "
                     f"{r['mfu']:>8.1%}")
    if "gen2_speedup" in res:
        lines.append(f"the gen2 recipe's step (batch {res['gen2_batch']} x {res['length']}, no dropout): "
                     f"{res['gen2_speedup']:.2f}x the tokens per second of the first twins' step")
    lines.append(f"berteval's step: {res['speedup']:.2f}x the tokens per second of transformers' standard step "
                 f"(MLM logits at the {res['masked_per_batch']} masked positions of a batch instead of all "
                 f"{res['batch'] * res['length']:,}); examples: {res['examples']}")
    return "\n".join(lines)
