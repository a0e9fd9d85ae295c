import sys, time, json, torch, numpy as np
sys.path.insert(0, '/work/pt')
torch.set_num_threads(1)
from pathlib import Path
from berteval.pretrain import examples, loop
L=int(sys.argv[1]); B=int(sys.argv[2]); lr=float(sys.argv[3]); steps_max=int(sys.argv[4])
f=Path('/root/.cache/berteval/pretrain/08ef9d5b9afdcca9')
tr=examples._load(f,'train128'); held=examples._load(f,'heldout128')
# crop every sequence to L tokens (MLM only: masked positions past L dropped)
ids=tr.ids[:, :L].copy(); length=np.minimum(tr.length, L).astype(np.int16)
pos=tr.mlm_pos.copy(); tgt=tr.mlm_tgt.copy(); pos[pos>=L]=-1
crop=examples.Sequences(ids, length, np.minimum(tr.a_len, L-2).astype(np.int16), tr.nsp, pos, tgt)
hyper={"hidden_size":256,"layers":4,"heads":4,"intermediate_size":1024,"lr":lr,"warmup_steps":500,"beta1":0.9,"beta2":0.98,"weight_decay":0.01,"max_grad_norm":1.0}
model=loop.build_model(hyper, 8192, 0)
params,opt,sched=loop._optimiser(model, hyper, 9000, False)
obj=loop.Objective(model, False); torch.manual_seed(0); model.train()
rng=np.random.default_rng(0); order=rng.permutation(len(crop)); dev=torch.device('cpu'); losses=[]; t0=time.time()
for s in range(steps_max):
    b=loop.batch_tensors(crop, order[s*B:(s+1)*B], dev)
    with loop._autocast(dev,'bf16'): out=obj(**b)
    out['loss'].backward(); torch.nn.utils.clip_grad_norm_(params,1.0); opt.step(); sched.step(); opt.zero_grad(set_to_none=True)
    losses.append(float(out['mlm_loss']))
    if (s+1)%250==0:
        ev=loop.evaluate_sequences(model, held, dev, 'bf16', 1024)
        print(json.dumps({'step':s+1,'train_mlm_250':round(float(np.mean(losses[-250:])),4),'heldout128':ev,'s':round(time.time()-t0)}), flush=True)
