"""Corpus -> tokenizer.json, train.bin, val.bin and meta.json, cached under `cfg.cache_dir`.

    python -m data.prepare --config configs/small.toml [--data.vocab_size=4096 ...]

The cache directory's name is a fingerprint of the source's contents and every setting that changes the
output, so a second run reuses it in a second and a changed corpus or setting rebuilds. Shards are flat
arrays of token ids (uint16 while the vocabulary fits), each document preceded by `<|endoftext|>`, written
batch by batch so memory stays bounded whatever the corpus size. train.py calls `prepare` too.

With `data.tokenizer` (a checkpoint, e.g. an import, or a Hugging Face GPT-2 dir) no BPE is trained: that
tokenizer.json is copied unchanged and used as it is, the cache keys on its hash, and documents are
separated by the model's own end-of-text token (`</s>` for KoGPT2).
"""

if __name__ == "__main__":  # Ctrl-C while torch loads ends with one line, not a traceback
    from cli import stop_quietly_while_loading

    stop_quietly_while_loading()

import hashlib
import json
import os
import re
import shutil
import sys
import time
import unicodedata
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
from tqdm import tqdm

from cli.command import ArgumentParser, run_command
from cli.messages import LANGUAGES, messages, use_language
from data.cache import build_dir, cache_problem, file_records, remove_orphans
from data.config import DataConfig, DataError, auto_vocab_size
from data.corpora.build import build_corpus, report_line
from data.jamo import splits_syllables
from data.sources import Source, open_source
from data.split import plan_split, split_chunks
from data.tokenizer import EOT, WORDS, continuation_tokenizer, fast_encoder, tokenizer_hash, train_tokenizer
from hf.pretrained import open_pretrained
from cli.errors import UserError
from storage.atomic import write_failure
from storage.checkpoint import Pretrained
from training.config import load_config

# bump when the output of the same inputs changes (2: big files cut before a space; 3: file hashes; 4: a split's
# characters are those of its NFC text, the text the tokenizer reads, whatever the unit)
FORMAT = 4
BATCH_CHARS = 1 << 18  # characters encoded per batch: enough for both cores, small enough for memory
# The BPE trainer needs about 1 KB per distinct word, so it sees an evenly spread sample of this many
# characters of the training split: memory stays bounded (about 100 MB) however big the corpus is.
TOKENIZER_CHARS = 4_000_000


@dataclass
class Prepared:
    dir: Path  # holds train.bin, val.bin, meta.json, tokenizer.json
    meta: dict
    tokenizer_path: Path
    reused: bool


def prepare(cfg: DataConfig, verbose: bool = True) -> Prepared:
    """Prepare (or reuse) the tokenizer and token shards for `cfg`; bad input raises DataError. `verbose`: print
    what was prepared."""
    for spec in (cfg.source, cfg.val_source):
        if spec.startswith("corpus:"):  # fetched and extracted once, into data.cache_dir/corpora/NAME
            build_named_corpus(spec[len("corpus:") :], cfg, verbose)
    train = open_source(cfg.source, cfg)
    val = open_source(cfg.val_source, cfg) if cfg.val_source else None
    if verbose and val is not None and val.fingerprint == train.fingerprint:
        say = messages()
        print(say("warning", text=say("data.same_val")), file=sys.stderr)
    return prepare_sources(cfg, train, val, verbose)


def build_named_corpus(name: str, cfg: DataConfig, verbose: bool) -> None:
    say = messages()
    tell = (lambda key, **fields: print(say(key, **fields), flush=True)) if verbose else None
    out, note, reused = build_corpus(name, cache_dir=cfg.cache_dir, say=tell)
    if verbose:
        print(report_line(name, out, note, reused))


def prepare_sources(cfg: DataConfig, train: Source, val: Source | None = None, verbose: bool = True) -> Prepared:
    """`prepare` for already opened sources (tests pass in-memory ones)."""
    started = time.perf_counter()
    if cfg.vocab_size == "auto":  # with a given tokenizer the number is moot; 2048 keeps meta.json numeric
        cfg = replace(cfg, vocab_size=2048 if cfg.tokenizer else auto_vocab_size(training_chars(cfg, train, val)))
    settings = {k: v for k, v in asdict(cfg).items() if k not in ("source", "val_source", "cache_dir", "tokenizer")}
    if val:
        settings.pop("val_fraction")
    given = open_pretrained(cfg.tokenizer) if cfg.tokenizer else None
    if given:  # the tokenizer's contents, not where it lies, decide the output
        del settings["vocab_size"], settings["unit"]
        keys = [FORMAT, tokenizer_hash(given.tokenizer), given.eot_token, train.fingerprint, val and val.fingerprint]
    else:
        keys = [FORMAT, WORDS, TOKENIZER_CHARS, train.fingerprint, val and val.fingerprint]
    fingerprint = digest(keys + [settings])
    slug = re.sub(r"\W+", "_", Path(train.name).stem)[:40] or "corpus"
    vocab_size = given.tokenizer.get_vocab_size() if given else cfg.vocab_size
    out = Path(cfg.cache_dir) / f"{slug}-{vocab_size}-{fingerprint[:16]}"
    remove_orphans(out.parent)
    problem = cache_problem(out) if out.exists() else "absent"
    reused = problem is None
    if out.exists() and not reused:
        print(f"warning: the data cache {out} is damaged ({problem}); rebuilding it", file=sys.stderr)
    if not reused:
        tmp = build_dir(out)
        try:
            build(tmp, cfg, train, val, fingerprint, verbose, given)
            publish(tmp, out)
        except OSError as e:  # the corpus is read by code that reports its own errors: this is the cache
            raise DataError(f"cannot write the data cache {cfg.cache_dir} ({write_failure(e)}); set data.cache_dir "
                            f"to a writable directory") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    if verbose:
        report(out, meta, train.name, reused, time.perf_counter() - started)
    return Prepared(out, meta, out / "tokenizer.json", reused)


def check_splits(meta: dict, block_size: int) -> None:
    """Both splits must hold one window of block_size + 1 tokens: found now, not after steps were spent."""
    for part in ("train", "val"):
        tokens = meta["splits"][part]["tokens"]
        if tokens < block_size + 1:
            raise DataError(f"the {part} split holds {tokens} tokens, fewer than model.block_size + 1 = "
                            f"{block_size + 1}; lower model.block_size or give it more text (data.val_fraction, "
                            f"data.val_source)")


def training_chars(cfg: DataConfig, train: Source, val: Source | None) -> int:
    """Characters of the training split (one counting pass over the source)."""
    plan = plan_split(train.chunks(), cfg.val_fraction, train.name)
    return plan.chars if val else plan.chars - plan.val_chars


def publish(tmp: Path, out: Path):
    """Move a finished build into place in one rename; if another process got there first, keep its copy."""
    try:
        os.replace(tmp, out)
    except OSError:
        if cache_problem(out) is None:
            return
        shutil.rmtree(out)  # left damaged, e.g. files deleted by hand
        os.replace(tmp, out)


def build(out: Path, cfg: DataConfig, train: Source, val: Source | None, fingerprint: str, verbose: bool,
          given: Pretrained | None = None):
    """Split, train the tokenizer on (a sample of) the training part (unless `given`), encode both parts."""
    out.mkdir(parents=True)
    quiet = None if verbose else True  # None: tqdm draws bars only on a terminal
    plan = plan_split(tqdm(train.chunks(), desc="read", unit=" chunks", disable=quiet), cfg.val_fraction, train.name)
    if val:
        parts = {"train": (train.chunks, plan.chars),
                 "val": (val.chunks, plan_split(val.chunks(), cfg.val_fraction, val.name).chars)}
    else:
        parts = {"train": (lambda: split_chunks(train.chunks(), plan, "train"), plan.chars - plan.val_chars),
                 "val": (lambda: split_chunks(train.chunks(), plan, "val"), plan.val_chars)}
    chunks, chars = parts["train"]
    if given:
        tok, eot = given.tokenizer, given.eot_token
        shutil.copyfile(given.tokenizer_file, out / "tokenizer.json")  # byte for byte, as the model has it
    else:
        with tqdm(total=chars, desc="train tokenizer", unit=" chars", unit_scale=True, disable=quiet) as bar:
            stride = -(-chars // TOKENIZER_CHARS)  # ceil: every chunk while the split fits the budget
            tok, eot = train_tokenizer(sample_texts(chunks(), stride, bar), cfg.vocab_size, cfg.unit), EOT
        tok.save(str(out / "tokenizer.json"))
    meta = {"vocab_size": tok.get_vocab_size(), "dtype": "uint16" if tok.get_vocab_size() <= 1 << 16 else "uint32",
            "eot_id": tok.token_to_id(eot), "eot_token": eot, "splits": {}, "source_fingerprint": fingerprint,
            "tokenizer_hash": tokenizer_hash(tok), "unit": "jamo" if splits_syllables(tok) else "syllables",
            "data": asdict(cfg), "format": FORMAT}
    if given:
        meta["tokenizer_from"] = given.origin
    tok.encode_special_tokens = True  # a literal "<|endoftext|>" (or "</s>") in the corpus stays text
    for part, (chunks, chars) in parts.items():
        with tqdm(total=chars, desc=f"encode {part}", unit=" chars", unit_scale=True, disable=quiet) as bar:
            meta["splits"][part] = write_shard(tok, meta["eot_id"], chunks(), out / f"{part}.bin", meta["dtype"], bar)
        if not meta["splits"][part]["chars"]:
            raise DataError(f"the {part} split is empty ({plan.chars} characters in {train.name}); add text "
                            f"or set data.val_source")
    meta["files"] = file_records(out)  # checked on every reuse
    (out / "meta.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False), encoding="utf-8")


def sample_texts(chunks, stride: int, bar: tqdm):
    """Every `stride`-th chunk's text."""
    for i, (_, text) in enumerate(chunks):
        bar.update(len(text))
        if i % stride == 0:
            yield text


def write_shard(tok, eot: int, chunks, path: Path, dtype: str, bar: tqdm) -> dict:
    """Encode `(starts_document, text)` chunks batch by batch, appending the ids to `path`, each document
    after the `eot` id."""
    stats = {"documents": 0, "chars": 0, "bytes": 0, "tokens": 0}
    tok, normalize = fast_encoder(tok)  # our tokenizers' normalizer done in Python, faster
    inner = continuation_tokenizer(tok)  # a chunk inside a document gets no word-start marker of its own
    with open(path, "wb") as f:
        for batch in batches(chunks, BATCH_CHARS):
            texts = [normalize(text) for _, text in batch] if normalize else [text for _, text in batch]
            encodings = tok.encode_batch_fast(texts, add_special_tokens=False)
            if inner is not tok:  # encode the chunks that continue a document again, without the marker
                middle = [i for i, (first, _) in enumerate(batch) if not first]
                again = inner.encode_batch_fast([texts[i] for i in middle], add_special_tokens=False)
                for i, enc in zip(middle, again):
                    encodings[i] = enc
            ids = []
            for (first, text), enc in zip(batch, encodings):
                if first:
                    ids.append(eot)
                ids.extend(enc.ids)
                stats["documents"] += first
                stats["chars"] += len(unicodedata.normalize("NFC", text))  # bits/char: the same count for every unit
                stats["bytes"] += len(text.encode("utf-8"))
                bar.update(len(text))
            f.write(np.asarray(ids, dtype=dtype).tobytes())
            stats["tokens"] += len(ids)
    return stats


def batches(chunks, max_chars: int):
    """Group chunks into lists of about `max_chars` characters (a longer chunk makes a batch alone)."""
    batch, size = [], 0
    for chunk in chunks:
        batch.append(chunk)
        size += len(chunk[1])
        if size >= max_chars:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def report(out: Path, meta: dict, name: str, reused: bool, seconds: float):
    """What was prepared: the corpus, each split's size and the tokenizer."""
    say = messages()
    how = say("train.data_reused" if reused else "train.data_built")
    print(say("train.data", name=name, out=out, how=how, seconds=f"{seconds:.1f}"))
    for part, s in meta["splits"].items():
        print(say("train.split", part=part + ":", documents=f"{s['documents']:,}", chars=f"{s['chars']:,}",
                  tokens=f"{s['tokens']:,}", cpt=f"{s['chars'] / max(s['tokens'], 1):.2f}", path=out / (part + ".bin")))
    asked = meta["data"]["vocab_size"]  # a number, unless a given tokenizer made it moot
    note = say("train.tokenizer_fewer", asked=f"{asked:,}") if meta["vocab_size"] < asked else ""
    if meta.get("unit") == "jamo":
        note += say("train.tokenizer_jamo")
    if "tokenizer_from" in meta:
        note = say("train.tokenizer_from", origin=meta["tokenizer_from"], eot=meta["eot_token"])
    print(say("train.tokenizer", V=f"{meta['vocab_size']:,}", note=note, path=out / "tokenizer.json"))


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m data.prepare", description=__doc__.split("\n")[0],
                            epilog="Overrides: --data.KEY=VALUE, the value parsed as TOML.")
    parser.add_argument("--config", default="configs/small.toml", help="a run config (TOML): its [data] table")
    parser.add_argument("--lang", choices=LANGUAGES, help="language of the lines printed (default: the locale's)")

    def work():
        args, overrides = parser.parse_known_args(argv)
        other = next((arg for arg in overrides if not arg.startswith("--data.")), None)
        if other is not None:
            raise UserError(f"bad option {other!r}; python -m data.prepare takes --data.KEY=VALUE overrides, "
                            f"e.g. --data.vocab_size=512")
        use_language(args.lang)
        prepare(load_config(args.config, overrides).data)

    return run_command(work, interrupted="interrupted; the data cache is as it was (run the command again)")


if __name__ == "__main__":
    sys.exit(main())
