import sys, torch, numpy as np, time
sys.path.insert(0, '/work/pt'); torch.set_num_threads(1)
from pathlib import Path
from berteval.pretrain import examples, loop
f=Path('/root/.cache/berteval/pretrain/08ef9d5b9afdcca9'); tr=examples._load(f,'train128')
hyper={"hidden_size":256,"layers":4,"heads":4,"intermediate_size":1024,"lr":1e-3,"warmup_steps":20,"beta1":0.9,"beta2":0.98,"weight_decay":0.0,"max_grad_norm":1.0}
m=loop.build_model(hyper,8192,0); params,opt,sched=loop._optimiser(m,hyper,400,True)
obj=loop.Objective(m,True); m.train(); b=loop.batch_tensors(tr, np.arange(32), torch.device('cpu'))
t=time.time()
for s in range(300):
    with loop._autocast(torch.device('cpu'),'bf16'): out=obj(**b)
    out['loss'].backward(); torch.nn.utils.clip_grad_norm_(params,1.0); opt.step(); sched.step(); opt.zero_grad()
    if s%50==0: print(s, round(float(out['mlm_loss']),3), round(float(out['nsp_loss']),3), round(time.time()-t), flush=True)
print('final', float(out['mlm_loss']), float(out['nsp_loss']))
