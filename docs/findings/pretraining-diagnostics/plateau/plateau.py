"""Plateau diagnostics: train a fresh BertForPreTraining on the prepared examples with one schedule,
log held-out MLM loss at [MASK] positions (context use: below the unigram loss) and attention mass
on [CLS]/[SEP]. usage: plateau.py NAME lr batch warmup steps eval_every [nsp] [dtype] [extra]"""
import sys, time, json, math
import numpy as np, torch
sys.path.insert(0, "/work/main")
from berteval.pretrain import examples, loop
from berteval import config
name, lr, batch, warm, steps, every = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
nsp = (sys.argv[7] == "nsp") if len(sys.argv) > 7 else True
dtype = sys.argv[8] if len(sys.argv) > 8 else "bf16"
extra = json.loads(sys.argv[9]) if len(sys.argv) > 9 else {}
torch.set_num_threads(1)
hyper = dict(hidden_size=extra.get("hidden",256), layers=extra.get("layers",4), heads=extra.get("heads",4), intermediate_size=4*extra.get("hidden",256), vocab_size=8192, short_seq_prob=0.1,
             long_sequences=8000, limit_articles=None, steps=steps, long_share=0.0, batch_size=batch, long_batch_size=8,
             lr=lr, warmup_steps=warm, beta1=0.9, beta2=extra.get("beta2", 0.999), weight_decay=0.01, max_grad_norm=1.0)
prep = examples.prepare(__import__("pathlib").Path("/work/shared/data"), config.cache_dir(), 0, hyper, log=lambda m: None)
tok = prep.tokenizer
dev = torch.device("cpu")
model = loop.build_model(hyper, len(tok), 0)
if extra.get("dropout") is not None:
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout): m.p = extra["dropout"]
if extra.get("sinpos"):
    import math as _m
    P, H = model.bert.embeddings.position_embeddings.weight.shape
    pos = torch.arange(P)[:, None].float(); i = torch.arange(0, H, 2).float()
    ang = pos / torch.pow(10000.0, i / H)
    w = torch.zeros(P, H); w[:, 0::2] = torch.sin(ang); w[:, 1::2] = torch.cos(ang)
    with torch.no_grad(): model.bert.embeddings.position_embeddings.weight.copy_(w * extra["sinpos"])
if extra.get("unibias"):
    t = prep.train.mlm_tgt[:200000][prep.train.mlm_pos[:200000] >= 0].astype(np.int64)
    cnt = np.bincount(t, minlength=len(tok)).astype(np.float64) + 1.0
    lp = np.log(cnt / cnt.sum()); lp -= lp.mean()
    with torch.no_grad():
        model.cls.predictions.bias.copy_(torch.from_numpy(lp).float())
    print("decoder bias tied:", model.cls.predictions.decoder.bias is model.cls.predictions.bias if model.cls.predictions.decoder.bias is not None else None, flush=True)
params, opt, sched = loop._optimiser(model, hyper, steps, nsp)
if extra.get("decay") == "const":
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(1, warm)))
order = np.random.default_rng(0).permutation(len(prep.train))
obj = loop.Objective(model, nsp)
held = prep.heldout.take(np.arange(512))
mask_id = tok.mask_token_id
# the unigram loss over held-out [MASK] targets
def evaluate():
    model.eval()
    tot = {"mask_loss": 0.0, "mask_n": 0, "mask_correct": 0, "nsp": 0, "cls_sep": 0.0, "att_rows": 0}
    with torch.no_grad():
        for i in range(0, len(held), 64):
            b = loop.batch_tensors(held, np.arange(i, min(len(held), i + 64)), dev)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
                out = model.bert(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"], attention_mask=b["attention_mask"])
                h = out.last_hidden_state[b["mlm_rows"], b["mlm_cols"]]
                logits = model.cls.predictions(h).float()
                nl = model.cls.seq_relationship(out.pooler_output).float()
            ismask = b["input_ids"][b["mlm_rows"], b["mlm_cols"]] == mask_id
            ce = torch.nn.functional.cross_entropy(logits, b["mlm_targets"], reduction="none")
            tot["mask_loss"] += float(ce[ismask].sum()); tot["mask_n"] += int(ismask.sum())
            tot["mask_correct"] += int((logits.argmax(-1) == b["mlm_targets"])[ismask].sum())
            tot["nsp"] += int((nl.argmax(-1) == b["nsp_labels"]).sum())
    model.train()
    return {"mask_loss": round(tot["mask_loss"] / tot["mask_n"], 4), "mask_acc": round(tot["mask_correct"] / tot["mask_n"], 4),
            "nsp": round(tot["nsp"] / len(held), 4)}
def attention_sink():
    # share of attention on [CLS]/[SEP] per layer (eager copy of the weights)
    from transformers import BertModel
    m2 = BertModel(model.bert.config, add_pooling_layer=False)
    m2.config._attn_implementation = "eager"
    m2.load_state_dict(model.bert.state_dict(), strict=False); m2.eval()
    b = loop.batch_tensors(held, np.arange(32), dev)
    with torch.no_grad():
        o = m2(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"], attention_mask=b["attention_mask"], output_attentions=True)
    special = (b["input_ids"] == tok.cls_token_id) | (b["input_ids"] == tok.sep_token_id)  # (B,T)
    valid = b["attention_mask"].bool()
    out = []
    for a in o.attentions:  # (B,h,T,T)
        mass = (a * special[:, None, None, :]).sum(-1)  # (B,h,T)
        out.append(round(float(mass.mean(1)[valid].mean()), 3))
    return out
log = open(f"/tmp/exp/{name}.jsonl", "w")
t0 = time.time(); tokens = 0
short_len, short_steps = extra.get("short_len"), extra.get("short_steps", 0)
pos_k = 0
for s in range(steps):
    if short_len and s < short_steps:
        k = batch * (128 // short_len)
        idx = order[pos_k:pos_k + k]; pos_k += k
        b = loop.batch_tensors(prep.train, idx, dev)
        T = short_len
        b["input_ids"] = b["input_ids"][:, :T].clone(); b["token_type_ids"] = b["token_type_ids"][:, :T]
        b["attention_mask"] = b["attention_mask"][:, :T]
        keep = b["mlm_cols"] < T - 1
        b["input_ids"][:, T - 1] = tok.sep_token_id
        b["mlm_rows"], b["mlm_cols"], b["mlm_targets"] = b["mlm_rows"][keep], b["mlm_cols"][keep], b["mlm_targets"][keep]
    else:
        idx = order[pos_k:pos_k + batch]; pos_k += batch
        b = loop.batch_tensors(prep.train, idx, dev)
    if extra.get("allmask"):
        b["input_ids"][b["mlm_rows"], b["mlm_cols"]] = mask_id
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
        out = obj(**b)
    out["loss"].backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step(); sched.step(); opt.zero_grad(set_to_none=True)
    tokens += int(b["attention_mask"].sum())
    if (s + 1) % every == 0 or s == 0:
        row = {"step": s + 1, "tokens_M": round(tokens / 1e6, 2), "s": round(time.time() - t0), "lr": sched.get_last_lr()[0],
               "train_mlm": round(float(out["mlm_loss"]), 3), **evaluate(), "sink": attention_sink()}
        print(json.dumps(row), file=log, flush=True)
