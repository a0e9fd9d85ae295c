"""Diagnostic (issue 41, round 5), kept as it ran: the cue audit of NotNext-partner variants on the first 3,000
Wikipedia articles (the first twins' tokenizer), against berteval/pretrain/pairs.py as of commit 74a3f4a, where
`_partner(documents, d, want, avail, rng)` was the `v1` variant. v0: a free start; v2: v1 with ran-out B kept
short (crashed at 512, as the log shows). The builder that followed makes no pair where a B would run out and
matches paragraph starts (pairs.py now). Run: PYTHONPATH=. python builder_variants.py 3000 (the docs are cached
in a pickle outside the repository)."""
import time, sys, numpy as np
from pathlib import Path
from transformers import AutoTokenizer
from berteval.pretrain import wikipedia, sentences
from berteval.pretrain.examples import tokenize_documents
from berteval.pretrain import pairs, cues
from berteval.seeds import numpy_rng
import pickle, os
cache='/work/scratch/docs1500.pkl'
tok=AutoTokenizer.from_pretrained('leaderboard/results/encoders/wiki-bert-mini')
if os.path.exists(cache):
    docs=pickle.load(open(cache,'rb'))
else:
    corpus = wikipedia.load(Path('/work/shared/data'), 0, int(sys.argv[1]), log=lambda *a: None)
    lines=[l for a in corpus.train for l in a.lines if sentences.is_text(l)]
    spl=sentences.train(lines[:20000])
    docs,_=tokenize_documents(corpus.train, spl, tok)
    pickle.dump(docs, open(cache,'wb'))
orig=pairs._partner
def v0(documents, d, want, avail, rng):
    b=pairs._other(d,len(documents),rng)
    while len(documents[b])<2: b=pairs._other(d,len(documents),rng)
    return b, int(rng.integers(1,len(documents[b])))
def v2(documents, d, want, avail, rng):
    n_docs=len(documents)
    for _ in range(20):
        b_doc = pairs._other(d, n_docs, rng)
        lengths = np.array([len(x) for x in documents[b_doc]])
        if len(lengths) < 2: continue
        left = np.cumsum(lengths[::-1])[::-1][1:]
        if avail >= want:
            ok = np.flatnonzero(left >= want)
            if len(ok): return b_doc, 1 + int(ok[rng.integers(len(ok))])
        else:
            ok = np.flatnonzero(left < want)
            if len(ok):
                k = ok[np.argmin(np.abs(left[ok] - avail))]
                return b_doc, 1 + int(k)
    return b_doc, int(rng.integers(1, len(documents[b_doc]))) if len(documents[b_doc]) >= 2 else 0
for name, f in (('v0',v0),('v1',orig),('v2',v2)):
    pairs._partner=f
    for L in (128,512):
        st=pairs.PairStats()
        ps=list(pairs.one_pass(docs, L-3, 0.1, numpy_rng(0,'segments'), st))
        a=cues.audit(ps,[p.label for p in ps],tok)
        r=a['single_feature_rule_accuracy']
        print(name, L, len(ps), 'clf', a['classifier_5fold_accuracy'], {k:v for k,v in r.items() if v>0.51}, st.b_ran_out, flush=True)
