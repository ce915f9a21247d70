"""Transfer with what this machine has: pretrain on the Constitution alone, carry the weights through
the Hugging Face format, fine-tune on the bills, and compare with the same steps from scratch.

1. pretrain: train on the Constitution (its own BPE), validating on the held-out bill (the built-in
   corpus's validation document, never trained on);
2. `hf.export_gpt2` that run, then `hf.import_gpt2` the export (the round trip a real GPT-2 takes);
3. fine-tune: `train.init_from` the import on the nine other bills for --steps steps;
4. scratch: the same model shape, tokenizer, data and steps, from random weights.
Every row reports the held-out bill's bits per character (best and last checkpoint), the figure
train.py prints at its end.

    python bench/transfer.py                                   # configs/small.toml, minutes on a CPU
    python bench/transfer.py --config configs/tiny.toml --pretrain-steps 20 --steps 20   # a smoke run
"""

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import train  # noqa: E402
from data.sources import builtin_files  # noqa: E402
from hf.export_gpt2 import export  # noqa: E402
from hf.import_gpt2 import import_hf  # noqa: E402
from training.config import load_config  # noqa: E402


def run(config: Path, out: Path, cache: Path, steps: int, threads: int, *overrides) -> dict:
    """train.py's run with the bench's settings; returns its final record."""
    args = [f"--data.cache_dir={cache}", f"--train.max_steps={steps}", "--train.patience=0", *overrides]
    if threads:
        args.append(f"--train.threads={threads}")
    return train.train(load_config(config, args), out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "small.toml"), help="the shape and schedule")
    parser.add_argument("--pretrain-steps", type=int, default=1000, help="steps on the Constitution")
    parser.add_argument("--steps", type=int, default=300, help="steps on the bills, fine-tuned and from scratch")
    parser.add_argument("--lr", type=float, default=None, help="the fine-tune's peak lr (default: the config's)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--keep", metavar="DIR", help="keep the runs in DIR (default: a temporary dir)")
    args = parser.parse_args(argv)

    files = builtin_files()
    constitution, bills, held_out = files[0], files[1:-1], files[-1]
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="transfer-"))
    (work / "bills").mkdir(parents=True, exist_ok=True)
    for bill in bills:
        shutil.copyfile(bill, work / "bills" / bill.name)
    cache, val = work / "cache", f"--data.val_source={held_out}"
    try:
        pre = run(args.config, work / "pretrain", cache, args.pretrain_steps, args.threads,
                  f"--data.source={constitution}", val)  # fmt: skip
        export(work / "pretrain", work / "hf", force=True)
        imported = import_hf(work / "hf", work / "imported", force=True)
        lr = [f"--train.lr={args.lr}", f"--train.min_lr={args.lr / 10}"] if args.lr else []
        tuned = run(args.config, work / "finetune", cache, args.steps, args.threads, f"--data.source={work / 'bills'}",
                    val, f"--train.init_from={imported}", *lr)  # fmt: skip
        scratch = run(args.config, work / "scratch", cache, args.steps, args.threads, f"--data.source={work / 'bills'}",
                      val, f"--data.tokenizer={imported}")  # fmt: skip  # same tokenizer, random weights
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    print(f"\nheld-out bill {held_out.name}: bits per character (best checkpoint, last)")
    for name, steps, final in [("pretrained on the Constitution only", args.pretrain_steps, pre),
                               ("  + fine-tuned on the bills", args.steps, tuned),
                               ("from scratch on the bills", args.steps, scratch)]:  # fmt: skip
        print(f"{name:38} {steps:6} steps  {final['best_val_bpc']:.4f} (step {final['best_step']}), "
              f"{final['val_bpc']:.4f}")
    print(f"transfer: {scratch['best_val_bpc'] - tuned['best_val_bpc']:+.4f} bits/char better than from scratch")


if __name__ == "__main__":
    main()
