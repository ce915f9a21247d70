"""Corpus sources: the built-in Korean corpus, text files, directories, JSON lines, CSV/Parquet, `hf:NAME` and
`corpus:NAME` (a folder data/corpora built).

`open_source(spec, cfg)` checks a source and returns a `Source`; each call of `source.chunks()` is a fresh
pass over its text as `(starts_document, text)` chunks, NFC-normalised, in a fixed order. Big files come in
pieces of about `CHUNK_CHARS` characters cut before a space (see `cut_point`), so no pass holds the whole
corpus.
"""

import codecs
import functools
import hashlib
import importlib.util
import json
import os
import socket
import urllib.parse
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from data.config import DataConfig, DataError
from cli.errors import LONE_SURROGATE  # a JSON escape like "\ud800" puts half a UTF-16 pair in a string
from storage.user_files import check_kind, open_user_file, read_user_file

Chunks = Iterator[tuple[bool, str]]
CHUNK_CHARS = 1 << 13
READ_BYTES = 1 << 20
TABLE_KINDS = {".csv": "csv", ".parquet": "parquet"}


@dataclass
class Source:
    name: str  # what the user wrote, for messages and the cache directory's name
    fingerprint: str  # changes when the text changes
    chunks: Callable[[], Chunks]  # a fresh pass over the text


def open_source(spec: str, cfg: DataConfig) -> Source:
    """Resolve `builtin`, `hf:NAME` or a path into a `Source`; a missing or unusable one is a DataError."""
    if spec == "builtin":
        files = builtin_files()
        digest = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()
        return Source("builtin", digest, reading(lambda: text_files_chunks(files, "utf-8"), "builtin"))
    if spec.startswith("hf:"):
        return dataset_source(load_hf(spec[3:], cfg), cfg.text_field, spec)
    path = built_corpus(spec[len("corpus:") :], cfg) if spec.startswith("corpus:") else Path(spec).expanduser()
    is_dir = check_source_path(path, spec)
    files = sorted(f for f in path.rglob("*.txt") if f.is_file()) if is_dir else [path]
    if not files:
        raise DataError(f"no *.txt files under {spec}; put one document per .txt file there")
    fingerprint = contents_fingerprint(files, path)
    kind = "" if is_dir else path.suffix.lower()  # a folder is a folder of .txt files, whatever its name
    if kind in TABLE_KINDS:
        table = functools.cache(lambda: load_table(path, TABLE_KINDS[kind], cfg))
        return Source(spec, fingerprint, lambda: dataset_chunks(table(), cfg.text_field, spec))
    if kind in (".jsonl", ".json"):
        return Source(spec, fingerprint, reading(lambda: json_chunks(path, cfg.encoding, cfg.text_field), spec))
    return Source(spec, fingerprint, reading(lambda: text_files_chunks(files, cfg.encoding), spec))


def built_corpus(name: str, cfg: DataConfig) -> Path:
    """The folder of a built `corpus:NAME` (data.prepare builds it first, `python -m data.corpora NAME` alone)."""
    from data.corpora import corpus_folder, finished_build  # the corpora's package is needed only here

    folder = corpus_folder(name, cfg.cache_dir)
    if finished_build(folder) is None:
        raise DataError(f"the corpus {name} is not built in {folder}; build it with python -m data.corpora {name} "
                        f"(train.py builds it itself)")
    return folder


SOURCE_FIX = 'give a text file, a folder of them, "builtin" or "hf:NAME"'
FILE_FIX = "check that it is a readable text file"
JSON_LIST_BYTES = 1 << 30  # a .json list is parsed whole; .jsonl is read a line at a time
LINE_BYTES = 256 << 20  # one line of a .jsonl file: one document


def check_source_path(path: Path, spec: str) -> bool:
    """Whether the corpus path is a directory (else a regular file); anything else is refused before it is read,
    since a FIFO or a device never ends (or blocks forever)."""
    return check_kind(path, "data source", SOURCE_FIX, DataError, directory=True)


def read_failure(path, e: OSError) -> DataError:
    """The one line for a corpus file that could not be read."""
    return DataError(f"cannot read {path} ({e.strerror or e}); check that it is a readable file")


def reading(chunks: Callable[[], Chunks], spec: str) -> Callable[[], Chunks]:
    """`chunks`, with an OSError raised while reading (a file removed or made unreadable meanwhile, a disk
    error) as a DataError naming the file, so it is never mistaken for a failure to write the cache."""
    def guarded() -> Chunks:
        try:
            yield from chunks()
        except OSError as e:
            raise read_failure(e.filename or spec, e) from None

    return guarded


def contents_fingerprint(files: list[Path], root: Path) -> str:
    """sha256 of the files' names (below `root`) and contents: an edit changes it whatever the size and mtime.
    It reads the corpus once more at about 1.5 GB/s (0.15 s for 200 MB, bench/prepare_speed.py)."""
    digest = hashlib.sha256()
    for f in files:
        digest.update(json.dumps(str(f.relative_to(root)) if f != root else "").encode())
        with open_user_file(f, "corpus file", FILE_FIX, DataError) as stream:
            try:
                digest.update(hashlib.file_digest(stream, "sha256").digest())
            except OSError as e:
                raise read_failure(f, e) from None
    return digest.hexdigest()


def builtin_files() -> list[Path]:
    """konlpy's package data: the Constitution, then the ten bills in order (the last one is the val split)."""
    # find_spec locates the package without importing it: `import konlpy` loads jpype for its taggers.
    spec = importlib.util.find_spec("konlpy")
    if spec is None or not spec.submodule_search_locations:
        raise DataError('the built-in corpus comes with the konlpy package; run `pip install konlpy`')
    corpus = Path(list(spec.submodule_search_locations)[0]) / "data" / "corpus"
    files = [corpus / "kolaw" / "constitution.txt", *sorted((corpus / "kobill").glob("*.txt"))]
    if len(files) < 2 or not files[0].is_file():
        raise DataError(f"konlpy's corpus files are missing under {corpus}; reinstall konlpy")
    return files


def text_files_chunks(files: list[Path], encoding: str) -> Chunks:
    """One document per file, read in pieces cut where no token or NFC composition spans (`cut_point`)."""
    for path in files:
        first = True
        for text in decode_file(path, encoding):
            if text:
                yield first, unicodedata.normalize("NFC", text)
                first = False


def decode_file(path: Path, encoding: str) -> Iterator[str]:
    """Decode a file incrementally into pieces; a bad byte is a DataError naming the file and offset."""
    wide = codecs.lookup(encoding).name.startswith(("utf-16", "utf-32"))  # wide ones are full of NUL bytes
    decoder = codecs.getincrementaldecoder(encoding)()
    offset, pending = 0, ""
    with open_user_file(path, "corpus file", FILE_FIX, DataError) as f:
        while True:
            data = f.read(READ_BYTES)
            if offset == 0 and b"\x00" in data[:8192] and not wide:
                guess = wide_encoding(data[:8192])
                if guess:
                    raise DataError(f"{path} looks like {guess} text, not {encoding}; pass --data.encoding={guess}")
                raise DataError(f"{path} looks binary (it contains NUL bytes); point data.source at text files")
            held = len(decoder.getstate()[0])  # bytes of a character split by the previous read
            try:
                text = pending + decoder.decode(data, final=not data)
            except UnicodeError as e:
                raise decode_error(path, encoding, e, offset - held) from None
            if offset == 0 and codecs.lookup(encoding).name == "utf-8":
                text = text.removeprefix("\ufeff")
            offset += len(data)
            end = cut_point(text) if data else len(text)
            yield from split_pieces(text[:end])
            pending = text[end:]
            if not data:
                return


def decode_error(path, encoding: str, e: UnicodeError, offset: int = 0, where: str = "") -> DataError:
    """The one line for text that is not in its encoding: any UnicodeError (a codec may raise the bare type,
    with no position), `offset` the position of the decoded bytes in the file, `where` in it ("FILE line 3")."""
    at = f" at byte {offset + e.start}" if isinstance(e, UnicodeDecodeError) else ""
    reason = e.reason if isinstance(e, UnicodeDecodeError) else str(e) or type(e).__name__
    guess = wide_encoding(read_head(path))
    hint = (f"it looks like {guess} text: pass --data.encoding={guess}" if guess and not encoding.startswith(guess[:6])
            else "if it is a Korean Windows (cp949/EUC-KR) file, pass --data.encoding=cp949"
            if codecs.lookup(encoding).name == "utf-8" else "check data.encoding (for UTF-8 pass --data.encoding=utf-8)")
    return DataError(f"{where or path} is not valid {encoding}{at} ({reason}); {hint}")


BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"))  # UTF-32 LE's mark begins with UTF-16 LE's: it is tried first


def wide_encoding(head: bytes) -> str | None:
    """The UTF-16 or UTF-32 encoding the first bytes of a file show (what Windows Notepad's "Unicode" writes):
    by its byte-order mark, else, for UTF-16 without one, by decoding: Korean text comes out as Hangul and
    ASCII (at least 90% of it), where other bytes read as UTF-16 rarely do. "utf-16", "utf-32", "utf-16-le",
    "utf-16-be", or None."""
    for bom, name in BOMS:
        if head.startswith(bom):
            return name
    pairs = head[: len(head) // 2 * 2]
    for name in ("utf-16-le", "utf-16-be"):
        text = pairs.decode(name, errors="replace")
        readable = sum(1 for ch in text if "\uac00" <= ch <= "\ud7a3" or " " <= ch <= "~" or ch in "\n\r\t")
        if len(text) >= 4 and readable >= 0.9 * len(text):
            return name
    return None


def read_head(path: Path, size: int = 8192) -> bytes:
    try:
        with open_user_file(path, "corpus file", FILE_FIX, DataError) as f:
            return f.read(size)
    except (OSError, DataError):
        return b""


def cut_point(text: str) -> int:
    """Where to cut `text`; the rest waits for the next read. Just before the last space that follows a
    non-space: every tokenizer here starts a word with the space before it (ours, GPT-2's `Ġ`, KoGPT2's
    `▁`), so no token spans that point and the pieces encode as the whole text would (NFC never spans a
    space either). Without one, just after the last line break; else nowhere."""
    space = text.rfind(" ")
    while space > 0 and text[space - 1].isspace():
        space = text.rfind(" ", 0, space)
    if space > 0:
        return space
    line = text.rfind("\n")
    return line + 1 if line >= 0 else len(text)


def split_pieces(text: str) -> Iterator[str]:
    """Cut a decoded block into pieces of at most CHUNK_CHARS, each ending at a `cut_point`."""
    start = 0
    while len(text) - start > CHUNK_CHARS:
        end = start + cut_point(text[start:start + CHUNK_CHARS])
        yield text[start:end]
        start = end
    yield text[start:]


def json_chunks(path: Path, encoding: str, field: str) -> Chunks:
    """Documents from a .jsonl file (one JSON object per line) or a .json list of objects."""
    if path.suffix.lower() == ".json":
        try:
            data = read_user_file(path, "corpus file", "write it as .jsonl, one object per line, which is read a line "
                                  "at a time", JSON_LIST_BYTES, DataError)
            records = json.loads(data.decode(encoding).removeprefix("\ufeff"))
        except UnicodeError as e:
            raise decode_error(path, encoding, e) from None
        except json.JSONDecodeError as e:
            raise DataError(f"{path} is not a valid JSON file ({e}); for one object per line use .jsonl") from None
        if not isinstance(records, list):
            raise DataError(f"{path} must hold a JSON list of objects; for one object per line use .jsonl")
        yield from documents_chunks(record_text(r, field, f"{path} item {i}") for i, r in enumerate(records))
        return
    with open_user_file(path, "corpus file", FILE_FIX, DataError) as f:
        lines = (line for line in bounded_lines(f, path) if line.strip())
        yield from documents_chunks(jsonl_text(line, n, path, encoding, field) for n, line in enumerate(lines, 1))


def bounded_lines(f, path: Path) -> Iterator[bytes]:
    """The lines of `f`, each refused past LINE_BYTES before more of it is read (a file with no line break)."""
    for n, line in enumerate(iter(lambda: f.readline(LINE_BYTES + 1), b""), 1):
        if len(line) > LINE_BYTES:
            raise DataError(f"{path} line {n} is longer than {LINE_BYTES >> 20} MiB; a .jsonl file holds one "
                            "document per line")
        yield line


def jsonl_text(line: bytes, n: int, path: Path, encoding: str, field: str) -> str:
    try:
        record = json.loads(line.decode(encoding).removeprefix("\ufeff"))
    except UnicodeError as e:
        raise decode_error(path, encoding, e, where=f"{path} line {n}") from None
    except json.JSONDecodeError as e:
        raise DataError(f"{path} line {n} is not valid JSON ({e}); each line must be one JSON object") from None
    return record_text(record, field, f"{path} line {n}")


def record_text(record, field: str, where: str) -> str:
    """The text of one JSON record: an object's `field`, or a bare string."""
    if isinstance(record, str):
        return LONE_SURROGATE.sub("\ufffd", record)
    if not isinstance(record, dict) or field not in record:
        keys = ", ".join(record) if isinstance(record, dict) else type(record).__name__
        raise DataError(f"{where} has no {field!r} field (it has: {keys}); set --data.text_field=NAME")
    return field_text(record[field], field, where)


def field_text(text, field: str, where: str) -> str:
    """A text field's value (None: no text); anything but a string is refused with its type."""
    if text is not None and not isinstance(text, str):
        raise DataError(f"{where}: field {field!r} is {type(text).__name__}, not text; set --data.text_field "
                        f"to a text field")
    return LONE_SURROGATE.sub("\ufffd", text or "")


def documents_chunks(documents: Iterable[str]) -> Chunks:
    """Each non-empty document as one NFC chunk."""
    for text in documents:
        if text:
            yield True, unicodedata.normalize("NFC", text)


def dataset_source(ds, field: str, name: str) -> Source:
    """A `datasets.Dataset` (from the Hub cache, or built in memory by a test) as a Source."""
    # datasets gives every Dataset a fingerprint of its contents' origin; stable across loads from its cache.
    return Source(name, ds._fingerprint, lambda: dataset_chunks(ds, field, name))


def dataset_chunks(ds, field: str, name: str) -> Chunks:
    if field not in ds.column_names:
        raise DataError(f"{name} has no column {field!r} (it has: {', '.join(ds.column_names)}); "
                        f"set --data.text_field=NAME")
    for batch in ds.select_columns([field]).iter(batch_size=1000):
        yield from documents_chunks(field_text(t, field, name) for t in batch[field])


def load_table(path: Path, kind: str, cfg: DataConfig):
    import datasets  # slow to import: only for the sources that need it

    try:
        return datasets.load_dataset(kind, data_files=str(path), split="train",
                                     cache_dir=str(Path(cfg.cache_dir) / "datasets"))
    except Exception as e:  # pyarrow and datasets raise many types for a malformed file
        raise DataError(f"could not read {path} as {kind}: {first_line(e)}; check the file") from None


def load_hf(name: str, cfg: DataConfig):
    import datasets

    if not hub_reachable():  # from the local cache alone: no retries, each a line, over half a minute
        datasets.config.HF_HUB_OFFLINE = datasets.config.HF_DATASETS_OFFLINE = True
    try:
        return datasets.load_dataset(name, cfg.hf_config or None, split=cfg.hf_split)
    except Exception as e:  # offline, unknown name, bad config or split: all end here
        raise DataError(
            f"could not load Hugging Face data set {name!r} (config {cfg.hf_config or 'default'}, split "
            f"{cfg.hf_split}): {first_line(e)}; it is not in the local cache and could not be downloaded: "
            f"check the name, or run once with network access") from None


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face hub (HF_ENDPOINT, else huggingface.co) answers a connection within `timeout`."""
    endpoint = urllib.parse.urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    try:
        socket.create_connection((endpoint.hostname, endpoint.port or 443), timeout=timeout).close()
        return True
    except (OSError, ValueError):
        return False


def first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:200] if text else ''}"


def read_documents(chunks: Iterable[tuple[bool, str]]) -> list[str]:
    """Join a chunk stream back into whole documents (for small corpora: tests, inspection)."""
    documents = []
    for first, text in chunks:
        if first:
            documents.append(text)
        else:
            documents[-1] += text
    return documents
