"""Held-out loss and accuracy at [MASK] positions only (the copy of the 10% unchanged targets left out), for
published twin folders, beside the log-unigram baseline (every [MASK] guessed from the training targets'
frequencies). Reads the prepared cache the twins trained on."""
import sys, torch, numpy as np, json
sys.path.insert(0, "/work/main")
torch.set_num_threads(1)
from berteval.pretrain import examples, loop
from transformers import BertForPreTraining
F = "/root/.cache/berteval/pretrain/498afd6de42565e5/"
def load_seqs(name, n=None):
    with np.load(F + name + ".npz") as z:
        return examples.Sequences(*(z[k][:n] if n else z[k] for k in examples.ARRAYS))
held = load_seqs("heldout128", 2048)
mask_id = json.load(open(F + "tokenizer/tokenizer.json"))["model"]["vocab"]["[MASK]"]
with np.load(F + "train128.npz") as z:
    t = z["mlm_tgt"][:200000]
counts = np.bincount(t[t > 0].astype(np.int64), minlength=8192).astype(np.float64) + 1
logp = np.log(counts / counts.sum())
def score(model):
    model.eval(); tot = n = c = uni = cu = 0.0
    with torch.no_grad():
        for i in range(0, len(held), 64):
            b = loop.batch_tensors(held, np.arange(i, min(len(held), i + 64)), torch.device("cpu"))
            out = model.bert(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"], attention_mask=b["attention_mask"])
            logits = model.cls.predictions(out.last_hidden_state[b["mlm_rows"], b["mlm_cols"]]).float()
            m = b["input_ids"][b["mlm_rows"], b["mlm_cols"]] == mask_id
            ce = torch.nn.functional.cross_entropy(logits, b["mlm_targets"], reduction="none")
            tot += float(ce[m].sum()); n += int(m.sum()); c += int((logits.argmax(-1) == b["mlm_targets"])[m].sum())
            uni += float(-logp[b["mlm_targets"][m].numpy()].sum()); cu += int((b["mlm_targets"][m] == int(np.argmax(logp))).sum())
    return {"mask_positions": int(n), "loss": round(tot / n, 4), "accuracy": round(c / n, 4), "unigram_loss": round(uni / n, 4),
            "unigram_accuracy": round(cu / n, 4)}
for arg in sys.argv[1:]:
    print(arg, json.dumps(score(BertForPreTraining.from_pretrained(arg))))
