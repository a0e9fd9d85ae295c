"""The default model's architecture and tokenizer with seeded random weights: a stand-in for timing.

The device machine this project is sometimes lent (an accelerator host whose CPU may have AMX) takes a 64 MiB
working tree, and the default model's weights alone are 87 MB. Speed does not depend on the weights' values, so
a model with the same config, tokenizer and sentence-transformers files but random weights times the same;
parity and accuracy figures from it mean nothing and are not reported.

    python tests/tools/stand_in_model.py --files DIR           # here: copy everything but the weights to DIR
    python tests/tools/stand_in_model.py --files DIR --out M   # there: DIR's files + seeded random weights -> M
"""

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # berteval from this checkout

WEIGHTS = (".safetensors", ".bin")


def copy_files(files: Path) -> None:
    from berteval.models import default_model_path

    src = default_model_path()
    shutil.copytree(src, files, dirs_exist_ok=True, ignore=lambda _d, names: [n for n in names if n.endswith(WEIGHTS)])
    print(f"{files}: {sum(p.stat().st_size for p in files.rglob('*') if p.is_file()) / 1e6:.1f} MB, no weights")


def build(files: Path, out: Path, seed: int) -> None:
    import torch
    from transformers import AutoConfig, AutoModel

    torch.manual_seed(seed)
    model = AutoModel.from_config(AutoConfig.from_pretrained(files))  # the config's own initialisation, seeded
    shutil.copytree(files, out, dirs_exist_ok=True)
    model.save_pretrained(out)
    print(f"{out}: {model.config.model_type}, {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M random "
          f"parameters (seed {seed})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=Path, required=True, help="the model's files without weights")
    ap.add_argument("--out", type=Path, help="write the stand-in model here (else: fill --files from the default)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.out is None:
        copy_files(args.files)
    else:
        build(args.files, args.out, args.seed)


if __name__ == "__main__":
    main()
