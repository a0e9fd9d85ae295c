"""Pre-training BERT from scratch (`python -m berteval pretrain`), apart from `derive/` (encoders patched from a
base model): the text (`wikipedia`), its sentences (`sentences`), the WordPiece vocabulary (`vocab`), the NSP
pairs (`pairs`: cue-free; `segments`: the first generation's builder, still used by the derived encoders), the
cue audit (`cues`), masking (`masking`), the prepared examples (`examples`), the loop (`loop`), the command and
its recipes (`command`), the model card of a published twin (`card`), and the input-edit test of what an NSP
head learned (`edits`).

Modules import torch only where they train, so the CLI's `--help` stays light.
"""
