import sys, time, json, torch, numpy as np
sys.path.insert(0, '/work/pt')
torch.set_num_threads(1)
from pathlib import Path
from berteval.pretrain import examples, loop
from transformers import BertForPreTraining
drop=float(sys.argv[1]); lr=float(sys.argv[2]); steps_max=int(sys.argv[3])
f=Path('/root/.cache/berteval/pretrain/08ef9d5b9afdcca9')
tr=examples._load(f,'train128'); held=examples._load(f,'heldout128')
hyper={"hidden_size":256,"layers":4,"heads":4,"intermediate_size":1024,"steps":9000,"long_share":0.1,"batch_size":32,"long_batch_size":8,
 "lr":lr,"warmup_steps":500,"beta1":0.9,"beta2":0.98,"weight_decay":0.01,"max_grad_norm":1.0}
cfg=loop.bert_config(hyper, 8192); cfg.hidden_dropout_prob=drop; cfg.attention_probs_dropout_prob=drop
with torch.random.fork_rng(devices=[]):
    torch.manual_seed(0); model=BertForPreTraining._from_config(cfg, attn_implementation="sdpa")
params,opt,sched=loop._optimiser(model, hyper, 9000, True)
class P: pass
p=P(); p.train=tr; p.train_long=tr
plan=loop.schedule_plan(hyper); order,_=loop._orders(p, plan, 0)
obj=loop.Objective(model, True); torch.manual_seed(0); model.train()
dev=torch.device('cpu'); losses=[]
t0=time.time()
for s in range(steps_max):
    b=loop.batch_tensors(tr, order[s*32:(s+1)*32], dev)
    with loop._autocast(dev,'bf16'): out=obj(**b)
    out['loss'].backward(); torch.nn.utils.clip_grad_norm_(params,1.0); opt.step(); sched.step(); opt.zero_grad(set_to_none=True)
    losses.append(float(out['mlm_loss']))
    if (s+1)%250==0:
        ev=loop.evaluate_sequences(model, held, dev, 'bf16', 1024)
        print(json.dumps({'step':s+1,'train_mlm_250':round(float(np.mean(losses[-250:])),4),'heldout':ev,'s':round(time.time()-t0)}), flush=True)
