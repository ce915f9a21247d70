"""Decoding: pick the next token (greedy, temperature, top-k, top-p, repetition penalty) and loop.

    out = generate(model, idx, max_new_tokens=100, temperature=0.8, top_k=50)   # (B, T + n)
    for column in stream(model, idx, 100, temperature=0):                      # column: (B,)
        ...
    for column, logits in stream_with_logits(model, idx, 100, Sampling(use_cache=False)):  # the reference
        ...

The options are one `Sampling` (checked when made, as transformers' GenerationConfig); the functions take one,
or its fields as keywords.

`idx` is a batch of prompts of EQUAL length (B, T); each row decodes independently. With a KV cache
the prompt is run once (prefill) and then one token per step; `use_cache=False` recomputes the whole
context window every step and is the reference the cached path must match.

Sliding window. Learned positions stop at block_size, so the context is a window of the sequence.
It grows token by token; whenever it would exceed block_size tokens, it restarts from the most recent
block_size // 2 tokens (a prompt longer than block_size starts that way too). With the cache this means:
when the cache is full, keep the last block_size // 2 tokens, reset the cache and prefill them again
(never roll it, as the cached keys carry their old positions). Both paths use this one rule, so cached
and uncached greedy runs give the same tokens and logits even far past block_size.

Attention while decoding. Give `attention=[]` and every forward of the decoding takes the explicit path
(`model.forward_with_attention`, with the cache when there is one) and appends `(start, maps)`: maps
(B, n_layer, n_head, Tq, Tk) of the window that starts at sequence position `start` (a prefill gives
Tq rows, a cached step one). After the last token is chosen it is fed once more, so its row is there too.
"""

import math
import numbers
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from cli.arguments import need_int, need_real
from cli.errors import ModelInputError
from model.memory import check_fits, decoding_bytes

TEMPERATURE = 0.8  # the one default temperature: Sampling's, generate.py's, the page's
MAX_SEED = 2**64 - 1  # the largest seed torch's generators take: generate.py's --seed and train.seed alike


def keep_top_k(logits, k: int):
    """Set all but the k largest logits of each row to -inf (ties with the k-th are kept). (B, V) -> (B, V)"""
    kth = torch.topk(logits, min(k, logits.size(-1)), dim=-1).values[:, -1:]  # (B, 1)
    return logits.masked_fill(logits < kth, float("-inf"))


def keep_top_p(logits, p: float):
    """Nucleus: keep the smallest set of most likely tokens whose probability sums to >= p (at least one)."""
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True, stable=True)  # (B, V); ties: lower id first
    probs = sorted_logits.softmax(dim=-1)
    before = probs.cumsum(dim=-1) - probs  # probability of the tokens ranked above each one
    drop_sorted = before >= p  # the set already reached p without this token
    drop_sorted[:, 0] = False  # the top token stays, even for a p that rounds to 0 in the logits' dtype
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def seen_tokens(idx, vocab_size: int, eos_token_id: int | None = None):
    """Bool (B, V): True for every token id that occurs in its row of idx (B, T), except the end-of-text
    token: a prompt starts with it, and penalising it would discourage the text from ever ending."""
    seen = torch.zeros(idx.size(0), vocab_size, dtype=torch.bool, device=idx.device)
    seen.scatter_(1, idx, True)
    if eos_token_id is not None:
        seen[:, eos_token_id] = False
    return seen


def penalize_repetition(logits, seen, penalty: float):
    """CTRL-style: for tokens already seen, divide positive logits by penalty, multiply negative ones (kept
    finite: a penalty of 1e-300 would make them inf, and inf - inf is NaN)."""
    penalized = torch.where(logits > 0, logits / penalty, logits * penalty)
    largest = torch.finfo(logits.dtype).max
    return torch.where(seen, penalized.clamp(-largest, largest), logits)


def check_options(temperature, top_k, top_p, repetition_penalty) -> None:
    """Raise ModelInputError (a UserError) for a sampling option out of range, ArgumentTypeError for one that is
    no number ("hot": no comparison below would name it)."""
    temperature = need_real("temperature", temperature)  # 10**400 comes back as inf, refused below
    repetition_penalty = need_real("repetition_penalty", repetition_penalty)
    top_p = None if top_p is None else need_real("top_p", top_p, "a number (or unset)")
    if not (temperature >= 0 and math.isfinite(temperature)):
        raise ModelInputError(f"temperature {temperature} must be >= 0 (and finite); use 0 for greedy decoding")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral) or top_k < 1):
        raise ModelInputError(f"top_k {top_k!r} must be a positive integer (or unset)")
    if top_p is not None and not 0 < top_p <= 1:
        raise ModelInputError(f"top_p {top_p} must be in (0, 1]; 1 keeps every token")
    if not (repetition_penalty > 0 and math.isfinite(repetition_penalty)):
        raise ModelInputError(f"repetition_penalty {repetition_penalty} must be > 0 (and finite); 1 turns it off")


@dataclass(frozen=True)
class Sampling:
    """How a decoding chooses its tokens and runs its steps; a value out of range raises ModelInputError here.

    temperature 0 is greedy (top_k/top_p then do nothing); `seed` repeats a draw (a generator of its own on
    the prompt's device, unless one is given); a row that emits `eos_token_id` keeps emitting it, and the
    decoding stops once every row has; `use_cache=False` recomputes the window every step (the reference)."""
    temperature: float = TEMPERATURE
    top_k: int | None = None
    top_p: float | None = None
    repetition_penalty: float = 1.0
    seed: int | None = None
    eos_token_id: int | None = None
    use_cache: bool = True

    def __post_init__(self):
        check_options(self.temperature, self.top_k, self.top_p, self.repetition_penalty)
        if self.seed is not None:  # numpy's integers taken as ints, a bool refused (torch's manual_seed would raise)
            object.__setattr__(self, "seed", need_int("seed", self.seed, 0, MAX_SEED))


def choose_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None, same_race: bool = False,
                finite=None):
    """(B, V) logits -> (B,) token ids: argmax if temperature is 0, else a filtered sample (`draw`, with its
    `same_race`). A NaN or +inf logit (weights that overflow in their dtype) raises ModelInputError, not a sample
    of NaNs; -inf is a token filtered out. `finite`: a bool tensor on the logits' device that takes the check
    instead (`&=`, no host sync), for the caller to look at when it chooses (`check_finite`)."""
    top = logits.max(dim=-1, keepdim=True)  # one pass for the checks, greedy decoding and the shift below
    ok = top.values.isfinite().all()  # a NaN anywhere in a row is its max, and so is +inf
    if finite is None:
        check_finite(ok, logits.dtype)
    else:
        finite &= ok
    if temperature == 0:  # max's kernel is ~2x argmax's on CPU; both return the first maximum's index
        return top.indices.squeeze(1)
    probs = sampling_probs(logits, temperature, top_k, top_p, top.values)  # (B, V)
    return draw(probs, generator, same_race)  # (B,)


def check_finite(finite, dtype) -> None:
    """ModelInputError unless `finite` (a bool tensor: every logit so far finite) holds: one host sync."""
    if not bool(finite):
        raise ModelInputError("the model's logits hold NaN or inf at this step (its weights overflow in "
                              f"{str(dtype).removeprefix('torch.')}); use other weights or another dtype")


def draw(probs, generator=None, same_race: bool = False):
    """(B, V) probabilities -> (B,) token ids, one drawn from each row: the token whose p / E is largest, with
    E ~ Exp(1) drawn for every token (an exponential race, the Gumbel-max trick: token i wins with probability
    p_i; `torch.multinomial` draws a single sample the same way, so the two agree draw for draw). `same_race`:
    one row of E for all rows, which is what B decodings seeded alike draw for their first tokens."""
    race = torch.empty_like(probs[:1] if same_race else probs).exponential_(generator=generator)  # (B or 1, V)
    return (probs / race).argmax(dim=-1)


def sampling_probs(logits, temperature=1.0, top_k=None, top_p=None, top=None):
    """(B, V) logits -> (B, V) the probabilities `choose_next` samples from (temperature 0: all on the argmax).
    `top`: the rows' max logits (B, 1), when the caller has them."""
    if temperature == 0:
        return F.one_hot(logits.argmax(dim=-1), logits.size(-1)).to(logits.dtype)
    top = logits.amax(dim=-1, keepdim=True) if top is None else top
    # The max first, so a tiny temperature sends the others to -inf (never inf - inf = nan); and no smaller
    # than the dtype's smallest normal, which 1e-300 would underflow past to 0 (0 / 0 = nan).
    temperature = max(temperature, torch.finfo(logits.dtype).tiny)
    logits = (logits - top) / temperature
    if top_k is not None:
        logits = keep_top_k(logits, top_k)
    if top_p is not None and top_p < 1:
        logits = keep_top_p(logits, top_p)
    return logits.softmax(dim=-1)


def window_start(start: int, n: int, block_size: int) -> int:
    """Start of the context window once the sequence has n tokens (the module docstring's rule)."""
    return start if n - start <= block_size else n - max(1, block_size // 2)


def stream_with_logits(model, idx, max_new_tokens, sampling: Sampling | None = None, generator=None, attention=None,
                       **options):
    """Like `stream`, but yields `(column (B,), logits (B, V))`: each new token and the raw model
    logits it was chosen from (before penalty, temperature and filtering). `attention`: a list that
    receives the maps of every forward (see the module docstring). The options are checked now, before
    the first step: the decoding itself runs as the result is iterated."""
    sampling = Sampling(**options) if sampling is None else sampling
    check_decoding(model, idx, max_new_tokens, attention)
    if generator is None and sampling.seed is not None:
        generator = torch.Generator(device=idx.device).manual_seed(sampling.seed)
    return decode(model, idx, max_new_tokens, sampling, generator, attention)


def check_decoding(model, idx, max_new_tokens, attention) -> None:
    """ModelInputError for a decoding this model cannot run: before any step, and before a word is printed."""
    need_int("max_new_tokens", max_new_tokens, lo=0)
    B, T = idx.shape
    if T == 0:
        raise ModelInputError("the prompt is empty; give at least one token (for example the end-of-text id)")
    if idx.min() < 0 or idx.max() >= model.config.vocab_size:  # one check, before the loop
        raise ModelInputError(
            f"prompt ids must lie in [0, {model.config.vocab_size}); was it encoded by this model's tokenizer?"
        )
    check_fits(decoding_bytes(model.config, B, T + max_new_tokens, recording=attention is not None), idx.device,
               f"decoding {B} x {T + max_new_tokens:,} tokens", "ask for fewer new tokens or samples")


@torch.inference_mode()
def decode(model, idx, max_new_tokens, sampling: Sampling, generator, attention):
    """The loop of `stream_with_logits`, its inputs checked. It calls nothing but the model: for one cached token a
    sped-up model picks its own faster step (model/speed/fast_gpt.py)."""
    B, T = idx.shape
    temperature, top_k, top_p, repetition_penalty = (sampling.temperature, sampling.top_k, sampling.top_p,
                                                     sampling.repetition_penalty)
    eos_token_id, use_cache = sampling.eos_token_id, sampling.use_cache
    block_size = model.config.block_size
    out = torch.empty(B, T + max_new_tokens, dtype=torch.long, device=idx.device)  # the whole sequence
    cache = model.new_kv_cache(B) if use_cache else None
    out[:, :T] = idx
    seen = seen_tokens(idx, model.config.vocab_size, eos_token_id) if repetition_penalty != 1 else None
    done = torch.zeros(B, dtype=torch.bool, device=idx.device) if eos_token_id is not None else None
    # a host sync stalls a GPU's queue of kernels: there the checks wait 16 steps (rows that ended meanwhile keep
    # emitting eos); a CPU has no queue to stall, and checks every step
    sync_every = 1 if idx.device.type == "cpu" else 16
    finite = None if sync_every == 1 else torch.ones((), dtype=torch.bool, device=idx.device)  # a CPU: choose_next's
    recording = attention is not None  # recording needs the explicit path of the model's own blocks
    n = T
    start = window_start(0, n, block_size)
    fresh = out[:, start:n]  # the tokens the cache has not seen yet (the prompt, at first)

    def record():  # one forward on the explicit path; its maps go to `attention`
        logits, maps = model.forward_with_attention(fresh if use_cache else out[:, start:n], kv_cache=cache)
        attention.append((start, maps))  # maps: (B, L, nh, Tq, Tk)
        return logits[:, -1]  # (B, V)

    for _ in range(max_new_tokens):
        if recording:
            logits = record()
        else:
            logits = model(fresh if use_cache else out[:, start:n], kv_cache=cache)[0][:, -1]  # (B, V)
        scores = penalize_repetition(logits, seen, repetition_penalty) if seen is not None else logits
        column = choose_next(scores, temperature, top_k, top_p, generator, finite=finite)  # (B,)
        if done is not None:  # finished rows keep emitting eos
            column = column.masked_fill(done, eos_token_id)
            done |= column == eos_token_id
        if seen is not None:  # an eos it emits ends the row, so marking it changes nothing
            seen.scatter_(1, column[:, None], True)
        out.select(1, n).copy_(column)  # out[:, n] = column, without the indexing machinery
        n += 1
        yield column, logits
        new_start = window_start(start, n, block_size)
        if new_start == start:
            fresh = out.narrow(1, n - 1, 1)  # (B, 1), out[:, n - 1 : n] in one call
        else:  # window full: restart it (and the cache) from the last block_size // 2 tokens
            start = new_start
            fresh = out[:, start:n]  # (B, block_size // 2)
            if use_cache:
                cache.reset()
        synced = (n - T) % sync_every == 0 or n - T == max_new_tokens  # a GPU runs ahead between two looks
        if synced and finite is not None:
            check_finite(finite, logits.dtype)
        if synced and done is not None and bool(done.all()):  # with an eos: whether every row has ended
            break
    if recording and n > T:  # the last token's own row
        record()


def stream(model, idx, max_new_tokens, sampling: Sampling | None = None, generator=None, attention=None, **options):
    """The new token column (B,) of every step; stops after max_new_tokens, or once every row has emitted
    `eos_token_id`. Options as in `generate`; `attention` as in `stream_with_logits`. Checked now."""
    return (column for column, _ in stream_with_logits(model, idx, max_new_tokens, sampling, generator, attention,
                                                       **options))


def generate(model, idx, max_new_tokens, sampling: Sampling | None = None, generator=None, **options):
    """Continue each prompt of idx (B, T) (equal lengths) and return (B, T + n), n <= max_new_tokens.

    `sampling`, or its fields as keywords (`Sampling`): temperature 0 is greedy; a seeded `torch.Generator` on
    the model's device (or `seed`) makes sampling reproducible; a row that emits eos_token_id keeps emitting
    it, and decoding stops early once every row has. Call `model.eval()` first (storage.checkpoint.load_model
    does) so dropout is off.
    """
    columns = list(stream(model, idx, max_new_tokens, sampling, generator, **options))
    if not columns:
        return idx.clone()
    return torch.cat([idx, torch.stack(columns, dim=1)], dim=1)  # (B, T + n)
