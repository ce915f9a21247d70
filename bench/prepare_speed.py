"""How fast `python -m data.prepare` turns a big corpus into shards, and how much memory it needs.

    python bench/prepare_speed.py [--mb 200] [--layout file|dir] [--vocab-size 8192]
    python bench/prepare_speed.py --vocab-sweep     # how data.vocab_size's default was chosen
    python bench/prepare_speed.py --fingerprint-only  # what hashing the corpus's contents costs

Generates a Korean-looking corpus of `--mb` megabytes in a temp dir: words of the built-in corpus mixed with
a few hundred thousand made-up words of real syllables, Zipf-distributed, so the tokenizer trainer sees a
realistic number of distinct words. `file` is one big .txt (one document), `dir` is 1 MB documents. Then it
runs the prepare CLI in a child process and prints MB/s and the child's peak memory (ru_maxrss) next to that of
a child that only imports the same modules. Prints figures; asserts nothing. Linux (reads /proc).
"""

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from data.config import DataConfig  # noqa: E402
from data.sources import builtin_files, open_source  # noqa: E402
from data.split import plan_split, split_chunks  # noqa: E402
from data.tokenizer import train_tokenizer  # noqa: E402


def make_words(rng: np.random.Generator, n_made_up: int) -> np.ndarray:
    """The built-in corpus's words followed by made-up words of 1-4 of its syllables, in random rank order."""
    text = "\n".join(f.read_text(encoding="utf-8") for f in builtin_files())
    real = sorted(set(text.split()))
    syllables = np.array(re.findall(r"[가-힣]", text))  # with repeats: common syllables are drawn more
    lengths = rng.integers(1, 5, n_made_up)
    picks = syllables[rng.integers(0, len(syllables), lengths.sum())]
    made_up = ["".join(w) for w in np.split(picks, np.cumsum(lengths)[:-1])]
    words = np.array(real + made_up, dtype=object)
    rng.shuffle(words)
    return words


def write_corpus(out: Path, megabytes: int, layout: str, seed: int = 0) -> int:
    """Write the corpus under `out` and return its size in bytes."""
    rng = np.random.default_rng(seed)
    words = make_words(rng, 300_000)
    ranks = np.arange(1, len(words) + 1)
    probs = ranks ** -1.1 / (ranks ** -1.1).sum()  # Zipf's law, as in natural text
    out.mkdir(parents=True)
    written, part = 0, 0
    f = open(out / "corpus.txt", "wb")
    while written < megabytes * 1_000_000:
        idx = rng.choice(len(words), size=100_000, p=probs)
        line_ends = rng.random(100_000) < 1 / 12  # about 12 words a line
        text = "".join(w + ("\n" if end else " ") for w, end in zip(words[idx], line_ends))
        written += f.write((text + "\n").encode("utf-8"))
        if layout == "dir" and written >= (part + 1) * 1_000_000:
            f.close()
            part += 1
            f = open(out / f"doc{part:05d}.txt", "wb")
    f.close()
    return sum(p.stat().st_size for p in out.iterdir())


# Runs in the child: ru_maxrss would also count the parent's memory at fork time, VmHWM is this process's own.
CHILD = """import sys
from data.prepare import main
code = main(sys.argv[1:]) if sys.argv[1:] else 0
print(next(line for line in open("/proc/self/status") if line.startswith("VmHWM")).split()[1])  # kB
sys.exit(code)
"""


def run_child(args: list[str]) -> tuple[str, float, float]:
    """Run the prepare CLI with `args` (none: imports only) in a child; return (its report, peak MB, CPU s)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([sys.executable, "-c", CHILD, *args], cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    *report, peak_kb = out.stdout.splitlines()
    return "\n".join(report), int(peak_kb) / 1024, cpu


def vocab_sweep(sizes=(512, 1024, 2048, 3072, 4096, 8192)):
    """Per vocabulary size on the built-in corpus: characters per token, and the validation bill's code length
    under a unigram model of the training tokens (a context-free proxy for bits per character)."""
    source = open_source("builtin", DataConfig())
    plan = plan_split(source.chunks(), DataConfig().val_fraction, "builtin")
    train = [text for _, text in split_chunks(source.chunks(), plan, "train")]
    val = "".join(text for _, text in split_chunks(source.chunks(), plan, "val"))
    print("vocab  actual  train chars/token  val chars/token  val unigram bits/char  tokens seen <5 times")
    for size in sizes:
        tok = train_tokenizer(iter(train), size)
        train_ids = np.concatenate([e.ids for e in tok.encode_batch(train)])
        counts = np.bincount(train_ids, minlength=tok.get_vocab_size()) + 0.5  # add-half smoothing
        val_ids = tok.encode(val).ids
        bits = -np.log2(counts[val_ids] / counts.sum()).sum()
        rare = int((counts[257:] < 5).sum())
        print(f"{size:5d}  {tok.get_vocab_size():6d}  {len(''.join(train)) / len(train_ids):17.2f}  "
              f"{len(val) / len(val_ids):15.2f}  {bits / len(val):21.3f}  {rare:6d} of {tok.get_vocab_size() - 257}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--layout", choices=["file", "dir"], default="file")
    parser.add_argument("--vocab-size", type=int, default=8192)
    parser.add_argument("--vocab-sweep", action="store_true", help="only compare vocabulary sizes on builtin")
    parser.add_argument("--fingerprint-only", action="store_true", help="only time the corpus fingerprint")
    args = parser.parse_args()
    if args.vocab_sweep:
        return vocab_sweep()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        corpus = Path(tmp) / "corpus"
        size = write_corpus(corpus, args.mb, args.layout)
        source = corpus / "corpus.txt" if args.layout == "file" else corpus
        print(f"generated {size / 1e6:.0f} MB ({args.layout}) in {time.perf_counter() - t0:.0f} s")
        times = []
        for _ in range(3):  # the page cache is warm after the first: a reuse reads a corpus just prepared
            t0 = time.perf_counter()
            open_source(str(source), DataConfig())
            times.append(time.perf_counter() - t0)
        print(f"contents fingerprint (sha256 of the corpus, done on every prepare): median {sorted(times)[1]:.2f} s, "
              f"{size / 1e6 / sorted(times)[1]:.0f} MB/s (first {times[0]:.2f} s)")
        if args.fingerprint_only:
            return
        _, baseline, _ = run_child([])
        cli = ["--config", "configs/small.toml", f"--data.source={source}", f"--data.cache_dir={tmp}/cache",
               f"--data.vocab_size={args.vocab_size}"]
        t0 = time.perf_counter()
        report, peak, cpu = run_child(cli)
        seconds = time.perf_counter() - t0
        print(report)
        print(f"prepare: {seconds:.1f} s, {size / 1e6 / seconds:.2f} MB/s ({cpu:.0f} CPU seconds on "
              f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f})")
        print(f"peak RSS: {peak:.0f} MB (imports alone: {baseline:.0f} MB, so {peak - baseline:.0f} MB for the work; "
              f"corpus {size / 1e6:.0f} MB)")
        t0 = time.perf_counter()
        run_child(cli)
        print(f"second run (cache reused): {time.perf_counter() - t0:.1f} s")
        from data.prepare import prepare  # imports torch (through model/): only now, after the children ran
        from training.config import load_config

        cfg = load_config(ROOT / "configs" / "small.toml", cli[2:]).data
        t0 = time.perf_counter()
        assert prepare(cfg, verbose=False).reused
        print(f"  of which the reuse itself (fingerprint, checks of meta.json and the shards' sha256): "
              f"{time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
