"""Run configuration: one TOML file with a table per dataclass, plus command-line overrides.

    cfg = load_config("configs/small.toml", ["--train.lr=3e-4", "--model.dropout=0.1"])
    cfg.train.lr, cfg.data.vocab_size, cfg.model.n_layer

`[data]` is `data.config.DataConfig`, `[model]` is `model.GPTConfig` without `vocab_size` (that comes
from the tokenizer: `data.vocab_size` until the data is prepared, then the tokenizer's own), `[train]` is
`TrainConfig` and `[log]` is `LogConfig` below. Override values are parsed as TOML
(`--train.compile=false`, `--log.wandb_run_name="a b"`); a bare word that is not TOML
(`--train.device=cpu`) is taken as a string. Every value is type-checked against its dataclass, and an
unknown section or key raises `ConfigError` listing the valid ones.

With `train.init_from` (a checkpoint or a Hugging Face GPT-2 directory) the model is that one: `[model]`
may set dropout and a smaller block_size, any other key only to the weights' own value (else one line
names it), and `data.tokenizer` defaults to the same directory, so the data is encoded with its tokenizer.
"""

import math
import tomllib
import types
import typing
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from cli.command import INT_RANGE
from cli.errors import UserError
from cli.messages import messages
from common.heads_off import read_heads
from data.config import DataConfig
from hf.pretrained import open_pretrained
from model.config import GPTConfig
from model.device import check_device_name
from model.sampling import MAX_SEED
from storage.user_files import CONFIG_BYTES, read_user_file
from training.recipe import AUTO, MANY_EPOCHS_BATCH, parse_duration


MAX_THREADS = 4096  # torch takes a C int; more threads than this is no machine
MAX_STRING = 4096  # characters: the longest path Linux takes, far beyond any name a setting holds
# What best/ keeps, and patience waits for: the weights with the lowest of these, measured at each evaluation.
# "copy_loss" is the loss on the second copy of the head scores' repeated random tokens (inspection/views/roles.py),
# which only copying from the context lowers: a lesson run's best/ is where its heads copy best.
BEST_BY = ("val_loss", "copy_loss")


class ConfigError(UserError):
    """A config file or override is wrong: unknown key, wrong type, value out of range."""


@dataclass
class TrainConfig:
    max_steps: int = 2000  # "auto" (with time_budget): as many as fit in the budget
    time_budget: str | float = ""  # e.g. "10m", "90s", "1h30m" or 600 (seconds): max_steps = "auto" plans its steps to fit
    batch_size: int = 16  # sequences per micro-step (per process under DDP)
    grad_accum: int = 1  # micro-steps per optimizer step
    lr: float = 1e-3  # peak learning rate, reached after warmup
    min_lr: float = 1e-4  # end of the cosine decay
    warmup_steps: int = 100
    weight_decay: float = 0.1  # matrices only; biases, LayerNorm gains stay undecayed
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0  # max global grad norm; 0 turns clipping off
    init_from: str = ""  # start from these weights: a checkpoint/run dir or a Hugging Face GPT-2 dir
    seed: int = 1337
    device: str = "auto"  # auto = cuda, then mps, then cpu; or cpu, cuda, cuda:1, mps
    dtype: str = "auto"  # auto | fp32 | bf16 | fp16 (autocast; auto: training.hardware.default_precision)
    compile: str | bool = "auto"  # auto | on | off (auto: training.hardware.compiles)
    eval_interval: int = 100  # steps between evaluations (and saves of last/ and best/)
    eval_iters: int = 10  # batches per split in each evaluation
    log_interval: int = 10  # steps between loss logs (the only host-device syncs)
    patience: int = 0  # stop after this many evaluations without a new best val loss; 0 = never
    sample_tokens: int = 64  # tokens of the sample printed at each evaluation; 0 = none
    peak_flops: float = 0.0  # per-device peak FLOP/s for MFU when the device is not in training.hardware.GPU_PEAK_FLOPS
    threads: int = 0  # torch CPU threads per process; 0 = torch's default (one per core)
    snapshots: int = 0  # evenly spaced copies of the weights in RUN/snapshots/, to inspect the model over training
    copy_lessons: float = 0.0  # share of training windows with a repeated run of random tokens (data/lessons.py)
    best_by: str = "val_loss"  # what best/ keeps (BEST_BY): the lowest validation loss, or the lesson's copy_loss
    speed_up: bool = True  # the speed layer (model/speed/); false: model/gpt.py and attention.py alone, slower
    heads_off: str = ""  # heads kept off from step 0, "L.H" or "L" (a whole layer), e.g. "0.2,1" or ["0.2", "1"] (common/heads_off.py)
    heads_off_mode: str = "mean"  # what a kept-off head outputs: "mean" (while training, its batch's mean) or "zero"
    head_costs: str | bool = "auto"  # each evaluation records each head's cost when off: auto (when cheap) | true | false

    def __post_init__(self):
        for name in ("max_steps", "batch_size", "grad_accum", "eval_interval", "eval_iters", "log_interval"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"train.{name} = {getattr(self, name)} must be positive")
        for name in ("warmup_steps", "patience", "sample_tokens", "seed", "threads", "snapshots"):
            if getattr(self, name) < 0:
                raise ConfigError(f"train.{name} = {getattr(self, name)} must be 0 or more")
        if isinstance(self.time_budget, float):  # a bare number in the TOML or on the command line: seconds
            if not (math.isfinite(self.time_budget) and self.time_budget > 0):
                raise ConfigError(f'train.time_budget = {self.time_budget:g} must be a positive number of seconds or like "10m"')
            self.time_budget = f"{self.time_budget:.10g}s"
        if self.time_budget:
            try:
                parse_duration(self.time_budget)
            except ValueError as e:
                raise ConfigError(f'train.time_budget = "{self.time_budget}": {e}; write it like "10m", "90s" or "1h30m"') from None
        if self.seed > MAX_SEED:
            raise ConfigError(f"train.seed = {self.seed} must be between 0 and {MAX_SEED}")
        for name in ("lr", "min_lr", "weight_decay", "grad_clip", "peak_flops"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) >= 0):
                raise ConfigError(f"train.{name} = {getattr(self, name)} must be a finite number >= 0")
        if self.min_lr > self.lr:
            raise ConfigError(f"train.min_lr = {self.min_lr} is above train.lr = {self.lr}; lower min_lr")
        if not 0 <= self.copy_lessons <= 1:
            raise ConfigError(f"train.copy_lessons = {self.copy_lessons} must be a share between 0 and 1")
        for name in ("beta1", "beta2"):
            if not 0 <= getattr(self, name) < 1:
                raise ConfigError(f"train.{name} = {getattr(self, name)} must be in [0, 1)")
        if self.best_by not in BEST_BY:
            raise ConfigError(f'train.best_by = "{self.best_by}" is not one of ' + ", ".join(f'"{b}"' for b in BEST_BY))
        if self.dtype not in ("auto", "fp32", "bf16", "fp16"):
            raise ConfigError(f'train.dtype = "{self.dtype}" is not one of "auto", "fp32", "bf16", "fp16"')
        if self.compile not in ("auto", "on", "off", True, False):
            raise ConfigError(f'train.compile = {self.compile!r} is not one of "auto", "on", "off", true, false')
        check_device_name(self.device)
        if self.heads_off_mode not in ("mean", "zero"):
            raise ConfigError(f'train.heads_off_mode = "{self.heads_off_mode}" is not one of "mean", "zero"')
        if self.head_costs not in ("auto", True, False):
            raise ConfigError(f'train.head_costs = {self.head_costs!r} is not one of "auto", true, false')
        if self.threads > MAX_THREADS:
            raise ConfigError(f"train.threads = {self.threads} is more than {MAX_THREADS}; 0 uses one per core")


@dataclass
class LogConfig:
    wandb: bool = False  # Weights & Biases (offline when there are no credentials)
    wandb_project: str = "kogpt-mini"
    wandb_run_name: str = ""  # empty: the run directory's name


@dataclass
class RunConfig:
    data: DataConfig = field(default_factory=DataConfig)
    model: GPTConfig = field(default_factory=GPTConfig)  # vocab_size: data.vocab_size until the tokenizer says
    train: TrainConfig = field(default_factory=TrainConfig)
    log: LogConfig = field(default_factory=LogConfig)
    auto: tuple[str, ...] = ()  # the "auto" settings ("train.lr", ...): placeholders until training.recipe resolves them
    run_id: str = ""  # the run's identity (training.run_dir.run_identity), which its snapshots carry

    def to_dict(self) -> dict:
        """The resolved config as saved in config.json ("auto" lists which values the run chose)."""
        return {**asdict(self), "auto": list(self.auto)}

    def describe(self) -> str:
        """One line per table, `[train] lr=0.001 ...`, as train.py prints the resolved settings, then a note line
        for each setting the run cannot honour as given (`unhonoured`)."""
        say = messages()
        tables = [(name, values) for name, values in self.to_dict().items() if isinstance(values, dict)]
        lines = [f"[{name}] " + " ".join(f"{k}={v!r}" for k, v in values.items()) for name, values in tables]
        return "\n".join(lines + [say("note", text=note) for note in unhonoured(self.train, self.model, self.auto)])


def evaluations(train: "TrainConfig") -> int:
    """How many evaluations a run of train.max_steps makes: every eval_interval steps, and at the last step."""
    return -(-train.max_steps // train.eval_interval)


def unhonoured(train: "TrainConfig", model: GPTConfig, auto: tuple[str, ...] = ()) -> list[str]:
    """What of the settings the run will not do as asked, said once at its start (train.snapshots past
    the evaluations is refused outright where max_steps is a number: `check_snapshots`)."""
    n, notes, say = evaluations(train), [], messages()
    if train.time_budget and "train.max_steps" not in auto:
        notes.append(say("train.note_budget", budget=repr(train.time_budget), steps=train.max_steps))
    if train.snapshots > n:
        notes.append(say("train.note_snapshots", snapshots=train.snapshots, n=n))
    if train.warmup_steps >= train.max_steps:
        notes.append(say("train.note_warmup", warmup=train.warmup_steps, steps=train.max_steps, lr=f"{train.lr:g}"))
    if train.eval_interval > train.max_steps:
        notes.append(say("train.note_eval", interval=train.eval_interval, steps=train.max_steps))
    if train.patience and train.patience >= n:
        notes.append(say("train.note_patience", patience=train.patience, n=n))
    if train.sample_tokens > model.block_size:  # the first is predicted from <|endoftext|> alone
        notes.append(say("train.note_sample", sample=train.sample_tokens, block=model.block_size,
                         half=model.block_size // 2))
    return notes


def check_snapshots(train: "TrainConfig") -> None:
    """train.snapshots past what a fixed number of steps can take (one per evaluation): refused with the largest
    useful value, since the run would keep fewer without a word."""
    n = evaluations(train)
    if train.snapshots > n:
        raise ConfigError(f"train.snapshots = {train.snapshots} is more than this run's {n} evaluations can take (one "
                          f"each: max_steps {train.max_steps}, eval_interval {train.eval_interval}); set at most {n}, "
                          "or evaluate more often with a smaller train.eval_interval")


SECTIONS = {"data": DataConfig, "model": GPTConfig, "train": TrainConfig, "log": LogConfig}


def load_config(path, overrides: list[str] = ()) -> RunConfig:
    """Read a TOML file, apply `--section.key=value` overrides, check every key and type."""
    path = Path(path)
    raw = read_toml(path)
    for arg in overrides:
        section, key, value = parse_override(arg)
        if text_only(section, key) and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = arg.partition("=")[2]  # as typed: "0.10" stays "0.10"
        table = raw.setdefault(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"[{section}] in {path} is not a table; fix the file")
        table[key] = value
    return build_config(raw, source=str(path))


# Settings whose value reads as a number but is text: --train.heads_off=0.10 is head 10 of layer 0, not 0.1
TEXT_KEYS = {("train", "heads_off")}


def text_only(section: str, key: str) -> bool:
    """Whether an override of [section] key is its text as typed (TEXT_KEYS)."""
    return (section, key) in TEXT_KEYS


def read_toml(path: Path) -> dict:
    """The parsed TOML file `path` of --config; ConfigError (one line) when it is missing, not a regular file,
    unreadable, too large for a config or not TOML."""
    fix = "pass --config a TOML file such as configs/small.toml"
    try:
        return tomllib.loads(read_user_file(path, "config file", fix, CONFIG_BYTES, ConfigError).decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"config file {path} is not valid TOML ({e}); fix the file") from None


def parse_override(arg: str) -> tuple[str, str, object]:
    """`--train.lr=3e-4` -> ("train", "lr", 0.0003); the value is TOML, or else a plain string."""
    name, sep, text = arg.removeprefix("--").partition("=")
    section, dot, key = name.partition(".")
    if not (arg.startswith("--") and sep and dot and section and key):
        raise ConfigError(f"cannot read option {arg!r}; overrides look like --train.lr=3e-4 (section.key=value)")
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        value = text
    except ValueError:  # an integer of more than 4,300 digits, which Python will not convert
        raise ConfigError(f"{name} = {text[:40]}... is out of range: it does not fit in 64 bits") from None
    return section, key, value


def build_config(raw: dict, source: str = "config") -> RunConfig:
    """Turn the parsed TOML tables into a RunConfig, rejecting unknown names and wrong types."""
    unknown = sorted(set(raw) - set(SECTIONS))
    if unknown:
        raise ConfigError(f"unknown section [{unknown[0]}] in {source}; valid sections: {', '.join(SECTIONS)}")
    values, auto = {}, []
    for section, cls in SECTIONS.items():
        table = raw.get(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{section} in {source} must be a table [{section}]")
        if section == "train" and "heads_off" in table:
            table = {**table, "heads_off": heads_off_text(table["heads_off"])}
        chosen = [k for k in AUTO.get(section, ()) if table.get(k) == "auto"]
        auto += [f"{section}.{k}" for k in chosen]
        values[section] = check_table(section, cls, {k: v for k, v in table.items() if k not in chosen})
    if "train.min_lr" in auto:  # a placeholder that cannot trip the min_lr <= lr check; resolved later
        values["train"]["min_lr"] = 0.0
    if "train.batch_size" in auto:  # the placeholder the first steps are timed at; resolved later
        values["train"]["batch_size"] = MANY_EPOCHS_BATCH[1]
    if "train.max_steps" in auto and values["train"].get("time_budget", "") == "":
        raise ConfigError('train.max_steps = "auto" needs train.time_budget (e.g. "10m"); or give a number of steps')
    data, train = DataConfig(**values["data"]), TrainConfig(**values["train"])
    if "train.max_steps" not in auto:  # a number of steps: known now (a budget plans them later: a note then)
        check_snapshots(train)
    if train.init_from:  # its small files are read now, so a bad path or setting fails before any data work
        start = open_pretrained(train.init_from)
        model = start.model_config(values["model"])
        data = replace(data, tokenizer=data.tokenizer or train.init_from)
    else:
        vocab = 2048 if data.vocab_size == "auto" else data.vocab_size  # a placeholder until the tokenizer says
        model = GPTConfig(vocab_size=vocab, **values["model"])  # checked now, before any data work
    if train.heads_off:  # checked against the model now: a head it lacks, one named twice, every head
        read_heads(train.heads_off, "train.heads_off", model, layers=True)
    if train.best_by == "copy_loss" and model.block_size < 5:  # <|endoftext|> and two copies of two tokens
        raise ConfigError(f'train.best_by = "copy_loss" needs model.block_size of at least 5 to repeat random tokens '
                          f'in (it is {model.block_size}); raise block_size or keep best_by = "val_loss"')
    return RunConfig(data=data, model=model, train=train, log=LogConfig(**values["log"]), auto=tuple(auto))


def heads_off_text(value):
    """train.heads_off as the one string the run keeps: a TOML list of names (["0.1", "1.2"]) joined by commas; any
    other value is left to the type check."""
    if not isinstance(value, list):
        return value
    if not all(isinstance(name, str) and name.strip() and "," not in name for name in value):
        raise ConfigError(f'train.heads_off = {short(value)} must name one head or layer per string, e.g. ["0.1", "1.2"] '
                          '(or "0.1,1.2")')
    return ",".join(value)


def check_table(section: str, cls, table: dict) -> dict:
    """Check each key exists in `cls` and its value has the field's type; ints widen to floats."""
    hints = typing.get_type_hints(cls)
    valid = [f.name for f in fields(cls) if not (cls is GPTConfig and f.name == "vocab_size")]
    out = {}
    for key, value in table.items():
        if key not in valid:
            hint = " (it comes from the tokenizer: set data.vocab_size)" if key == "vocab_size" else ""
            raise ConfigError(f"unknown key {section}.{key}{hint}; valid keys in [{section}]: {', '.join(valid)}")
        out[key] = check_type(f"{section}.{key}", value, hints[key])
    return out


def short(value) -> str:
    """A value for a message: its repr, cut to 60 characters (an integer of 5,000 digits has no str at all)."""
    if isinstance(value, int) and value.bit_length() > 200:
        return f"(an integer of {value.bit_length() * 0.30103:.0f} digits)"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_type(name: str, value, hint):
    """`value` if it fits the annotation `hint` (int, float, str, bool or a union of them), else ConfigError."""
    allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if isinstance(value, int) and not isinstance(value, bool) and not INT_RANGE[0] <= value <= INT_RANGE[1]:
        raise ConfigError(f"{name} = {short(value)} is out of range: it does not fit in 64 bits")
    if isinstance(value, str) and "\0" in value:
        raise ConfigError(f"{name} = {short(value)} holds a NUL byte, which no name or path may hold")
    if isinstance(value, str) and len(value) > MAX_STRING:
        raise ConfigError(f"{name} is {len(value):,} characters long; a setting holds at most {MAX_STRING:,}")
    for t in allowed:
        if t is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if t in (int, float) and isinstance(value, bool):
            continue
        if isinstance(value, t):
            return value
    expected = " or ".join({int: "an integer", float: "a number", str: "a string", bool: "true/false"}[t] for t in allowed)
    raise ConfigError(f"{name} = {short(value)} must be {expected}")
