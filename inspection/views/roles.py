"""The roles view: what each head does, role scores measured with fixed definitions, and what it costs switched off.

    records = compute(run, None, ["roles"])     # on the run's held-out text (inspection/heldout.py), or settings.heads_text
    print(text(records["roles"], "ko"))          # heads ranked by their strongest role, with their costs
    roles = measure_heads(run.model, ids, usable_ids(run), eot_id=run.eot_id)   # the scores alone, a HeadRoles

Every score is attention mass, a mean over query tokens of the attention a head puts on one set of keys:

- previous-token: on key q-1;  first-token (the "attention sink"): on key 0;  self: on key q.
  Over the queries q >= 2 of windows of held-out text, where those three keys are different tokens.
- duplicate-token: on the earlier occurrences of the query's own token, keys 1..q-2 (the previous and
  first tokens are left to their own roles), over the queries q >= 2 whose token occurs there.
  The four key sets are disjoint, so a head's four text scores add up to at most 1.
- induction: on a sequence of n random tokens (distinct, no special tokens) repeated twice, behind the
  end-of-text token: for each token of the second copy, on the token that followed its first occurrence,
  the key an induction head looks at to copy what came next. n = min(50, (block_size - 1) // 2); 16
  sequences, seed 0. With it, the loss on the tokens 2..n of each copy: a model that learns in context
  predicts the second copy far better (loss drop = first copy - second copy, in nats).

Given which tokens begin a word (`word_starts`, from the tokens' bytes: a leading space or newline), three word
roles beside them, on the same windows (inspection/views/words.py defines them): same-word (the earlier tokens of the
query's own word, 어절), word-start (its word's first token) and previous-word (every token of the word before).
They name the heads of a Korean model by what they do in Korean.

The held-out text of a run is chosen by `inspection.heldout.held_out_ids` (its docstring says how).

What a head is worth is measured by switching it off alone (common/heads_off.py): `Importance.loss` the nats per
token the held-out text costs more without it, `Importance.drop` the nats of the in-context loss drop lost. A role
score says where a head looks; these say what the model needs it for. The held-out loss is the mean next-token
loss over the same windows the role scores read.

`chance` is what a head that spreads its attention evenly over the keys it may see would score on the
same queries. A head's strongest role is its highest score when that is at least `ROLE_MIN` and twice
chance, else "mixed".
"""

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from cli.arguments import need_int, need_token_ids, need_type
from cli.errors import UserError
from cli.messages import messages
from common.heads_off import HeadsOff, head_name
from inspection.heldout import held_out_ids, held_out_means, held_out_windows, usable_ids, where
from inspection.labels import display_width, pad
from inspection.views.maps import text_role_sums
from inspection.views.words import word_role_sums, word_start_ids
from model import GPT
from storage.checkpoint import checkpoint_step, read_metrics

ROLES = ("previous-token", "first-token", "self", "duplicate-token", "induction")
WORD_ROLES = ("same-word", "word-start", "previous-word")  # measured when the tokens' word starts are known
ROLE_MIN = 0.3
SEQUENCES, MAX_REPEAT = 16, 50


@dataclass
class Importance:
    """What switching each head off alone costs (inspection/views/roles.py measures it)."""
    mode: str               # "mean" or "zero": what a switched-off head outputs
    loss: np.ndarray        # (L, H): held-out loss with the head off minus the full model's, nats per token
    drop: np.ndarray        # (L, H): the full model's in-context loss drop minus the drop with the head off
    full_loss: float        # the full model's held-out loss
    full_drop: float        # the full model's in-context loss drop


@dataclass
class HeadRoles:
    scores: dict[str, np.ndarray]   # role -> (L, H): ROLES, and WORD_ROLES when measured
    chance: dict[str, float]        # role -> the score of an even spread
    loss_first: float               # induction sequences: loss on tokens 2..n of the first copy, nats
    loss_second: float              # the same tokens in the second copy
    text: str = ""                  # where the held-out text came from
    repeat: int = 0                 # n, the length of each random copy
    importance: object = None       # what switching each head off costs (inspection/views/roles.py), if measured

    @property
    def loss_drop(self) -> float:
        return self.loss_first - self.loss_second

    @property
    def roles(self) -> tuple[str, ...]:
        """The roles measured: ROLES, then the WORD_ROLES when the word starts were known."""
        return ROLES + tuple(r for r in WORD_ROLES if r in self.scores)

    def strongest(self, layer: int, head: int) -> tuple[str, float]:
        """(role, score): the head's highest score, or ("mixed", that score) below the bar."""
        role = max(self.roles, key=lambda r: np.nan_to_num(self.scores[r][layer, head], nan=-1.0))
        score = float(self.scores[role][layer, head])
        return (role if score >= role_bar(self.chance[role]) else "mixed"), score

    def label(self, layer: int, head: int, lang: str = "en") -> str:
        """A short caption such as "previous-token 0.97" ("이전 토큰 0.97" in Korean), for titles."""
        role, score = self.strongest(layer, head)
        return f"{messages(lang)('role.' + role)} {score:.2f}"

    def labels(self, lang: str = "en") -> list[list[str]]:
        """label() of every head, (L, H) nested lists."""
        L, H = self.scores[ROLES[0]].shape
        return [[self.label(layer, head, lang) for head in range(H)] for layer in range(L)]


def role_bar(chance: float | None) -> float:
    """The score a head must reach to have a role: at least `ROLE_MIN` and twice chance (None: unknown, 0)."""
    return max(ROLE_MIN, 2 * (chance or 0.0))


NECESSARY = 1.0  # nats of the in-context loss drop a head takes away when off: from there on the model needs it


def first_reached(steps: list[int], values: list, bar: float) -> int | None:
    """The first of `steps` whose value (None or NaN: not measured there) reaches `bar`, or None: the evaluation at
    which a head passes its role's bar (heads.png, the live training page)."""
    return next((s for s, y in zip(steps, values) if y is not None and y >= bar), None)


def stored_roles(run) -> dict | None:
    """The roles record the run's training measured of the weights `run` holds, read back instead of measured
    again: best/'s at the run's end (metrics.jsonl's final "best_heads"), last/'s or a snapshot's at the evaluation
    of its step ("heads"); None where none was measured (or the folder is no run's)."""
    step = checkpoint_step(run.ckpt_dir)
    records = read_metrics(run.ckpt_dir.parent / "metrics.jsonl") if step is not None else []
    if run.ckpt_dir.name == "best":
        final = [r for r in records if r.get("kind") == "final" and r.get("best_step") == step]
        found = final[-1].get("best_heads") if final else None
    else:
        found = next((r.get("heads") for r in reversed(records) if r.get("kind") == "eval" and r.get("step") == step),
                     None)  # fmt: skip
    try:  # a record of this model's shape, or none
        roles = roles_from_record(found)
        shape = (run.model.config.n_layer, run.model.config.n_head)
        return found if all(roles.scores[r].shape == shape for r in roles.roles) else None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return None


def lesson_head(roles: HeadRoles, layers: list[int]) -> tuple[int, int] | None:
    """The head a page opens on, of `layers`: the strongest induction head where one passes its bar (the
    lesson: copying from context), else the head whose strongest role scores highest; None where no head has one."""
    H = roles.scores[ROLES[0]].shape[1]
    heads = [(layer, head) for layer in layers for head in range(H)]
    found = [(roles.strongest(*lh), lh) for lh in heads]
    induction = [(score, lh) for (role, score), lh in found if role == "induction"]
    if induction:
        return max(induction)[1]
    named = [(score, lh) for (role, score), lh in found if role != "mixed"]
    return max(named)[1] if named else None


FORMED = 0.5  # a previous-token or induction head counts as formed from this score (the lesson's bar)
DROP_FORMED = 2.0  # nats: the in-context loss drop of a model that copies from its context


@dataclass
class Circuit:
    """The copying circuit of the explainers: a previous-token head, an induction head in a layer above it that
    reads what it wrote, and the in-context loss drop they give. Each head is (layer, head, score), or None."""

    previous: tuple[int, int, float] | None
    induction: tuple[int, int, float]
    drop: float

    @property
    def formed(self) -> bool:
        return (self.previous is not None and min(self.previous[2], self.induction[2]) >= FORMED
                and self.drop >= DROP_FORMED)  # fmt: skip


def copying_circuit(roles: HeadRoles) -> Circuit:
    """The pair of a previous-token head and an induction head in a higher layer whose weaker score is highest
    (the strongest induction head when the model has one layer, and no previous-token head)."""
    prev, ind = (np.nan_to_num(roles.scores[r], nan=-1.0) for r in ("previous-token", "induction"))

    def best(scores, layers):  # (layer, head, score) of the highest score in these layers
        layer, head = max(((l, h) for l in layers for h in range(scores.shape[1])), key=lambda lh: scores[lh])
        return layer, head, float(scores[layer, head])

    if len(ind) == 1:
        return Circuit(None, best(ind, [0]), roles.loss_drop)
    pairs = [(best(prev, range(l)), best(ind, [l])) for l in range(1, len(ind))]
    previous, induction = max(pairs, key=lambda pair: min(pair[0][2], pair[1][2]))
    return Circuit(previous, induction, roles.loss_drop)


def uniform_maps(shape: tuple[int, ...], T: int) -> torch.Tensor:
    """(..., T, T) causal maps that spread each row evenly over the keys it may see."""
    rows = torch.ones(T, T).tril() / torch.arange(1, T + 1)[:, None]  # (T, T)
    return rows.expand(*shape, T, T)


@torch.inference_mode()
def text_roles(model, text_ids, word_starts=None) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """The four text scores (L, H) of every head on windows of `text_ids`, and their chance levels; with
    `word_starts` ((V,) bool: which token ids begin a word), the three word roles too."""
    windows = held_out_windows(model, text_ids)
    if windows.size(1) < 3:
        raise UserError(f"the held-out text has {windows.size(1)} tokens; the head scores need at least 3")
    c = model.config
    batch = max(1, (1 << 24) // (c.n_layer * c.n_head * windows.size(1) ** 2))  # maps of ~64 MB at most
    starts = None if word_starts is None else torch.as_tensor(np.asarray(word_starts))[windows.cpu()]  # (N, T)
    if starts is not None:
        starts[:, 0] = True  # a window's first token begins its first word
    totals, even = {}, {}
    for n, chunk in enumerate(windows.split(batch)):
        maps = model.forward_with_attention(chunk)[1].cpu()  # (B, L, H, T, T)
        rows = None if starts is None else starts[n * batch : n * batch + len(chunk)]
        for sums, m in ((totals, maps), (even, uniform_maps(maps.shape[:1] + (1, 1), maps.size(-1)))):
            found = text_role_sums(m, chunk.cpu()) | ({} if rows is None else word_role_sums(m, rows))
            for role, (s, count) in found.items():
                old = sums.get(role, (0.0, 0))
                sums[role] = (old[0] + s, old[1] + count)
    scores = {r: (s / n).numpy() if n else np.full((c.n_layer, c.n_head), np.nan) for r, (s, n) in totals.items()}
    chance = {r: float((s / n).item()) if n else float("nan") for r, (s, n) in even.items()}
    return scores, chance


def repeated_sequences(vocab_ids, n: int, count: int, seed: int, eot_id=None) -> torch.Tensor:
    """`count` rows of [eot] + r + r, r being n distinct tokens drawn from vocab_ids -> (count, 2n (+1))."""
    vocab = torch.as_tensor(list(vocab_ids), dtype=torch.long)
    g = torch.Generator().manual_seed(seed)
    rows = torch.stack([vocab[torch.randperm(len(vocab), generator=g)[:n]] for _ in range(count)])  # (S, n)
    rows = torch.cat([rows, rows], dim=1)  # (S, 2n)
    if eot_id is not None:
        rows = torch.cat([torch.full((count, 1), eot_id, dtype=torch.long), rows], dim=1)
    return rows


def induction_sequences(model, vocab_ids, eot_id=None, seed: int = 0) -> tuple[torch.Tensor, int, int]:
    """The induction test's `SEQUENCES` rows (on the model's device), n (each copy's length) and o (where the
    first copy starts: 1 behind the end-of-text token, else 0)."""
    o = 0 if eot_id is None else 1
    n = min(MAX_REPEAT, (model.config.block_size - o) // 2, len(vocab_ids))
    if n < 2:
        raise UserError(f"the induction test needs 2 copies of at least 2 tokens; block_size "
                        f"{model.config.block_size} and {len(vocab_ids)} usable tokens are too few")
    return repeated_sequences(vocab_ids, n, SEQUENCES, seed, eot_id).to(model.tok_emb.weight.device), n, o


def copy_losses(logits, seqs, n: int, o: int) -> tuple[float, float]:
    """The loss on tokens 2..n of the first and of the second copy, from logits (S, T, V) of seqs (S, T)."""
    def loss(start):  # positions start..start+n-2 predict tokens 2..n of the copy
        pos = torch.arange(start, start + n - 1)
        return F.cross_entropy(logits[:, pos].flatten(0, 1).float(), seqs[:, pos + 1].flatten()).item()

    return loss(o), loss(o + n)


@torch.inference_mode()
def induction_roles(model, vocab_ids, eot_id=None, seed: int = 0):
    """(induction scores (L, H), chance, loss on copy 1, loss on copy 2, n) as defined in the docstring."""
    seqs, n, o = induction_sequences(model, vocab_ids, eot_id, seed)
    logits, maps = model.forward_with_attention(seqs)  # (S, T, V), (S, L, H, T, T)
    i = torch.arange(n)
    query, target = o + n + i, o + i + 1  # each second-copy token -> the token after its first occurrence
    scores = maps[..., query, target].cpu().double().mean((0, 3)).numpy()  # (L, H)
    chance = float((1.0 / (query + 1)).double().mean())
    return scores, chance, *copy_losses(logits, seqs, n, o), n


def measure_heads(model, text_ids, vocab_ids, eot_id=None, text: str = "", word_starts=None) -> HeadRoles:
    """All five scores of every head (the module docstring defines them), and the three word roles given
    `word_starts` ((V,) bool: the token ids that begin a word, `inspection.views.words.word_start_ids`)."""
    need_type("model", model, GPT, "a GPT (run.model)")
    need_token_ids("text_ids", text_ids, model.config.vocab_size, "token ids of a held-out text (held_out_ids(run)[0])")
    need_token_ids("vocab_ids", vocab_ids, model.config.vocab_size, "the token ids to draw from (usable_ids(run))")
    if eot_id is not None:
        need_int("eot_id", eot_id, 0, model.config.vocab_size - 1, "or None")
    scores, chance = text_roles(model, text_ids, word_starts)
    scores["induction"], chance["induction"], first, second, n = induction_roles(model, vocab_ids, eot_id)
    return HeadRoles(scores, chance, first, second, text, n)


def format_roles_table(roles: HeadRoles, lang: str = "en") -> str:
    """Heads ranked by their strongest score: rank, layer, head, role, then the five scores (`lang`: "en" or "ko"),
    and with `roles.importance` what switching each head off alone costs."""
    say = messages(lang)  # first: it checks lang
    need_type("roles", roles, HeadRoles, "a HeadRoles (measure_heads(...), or nb.heads(run).roles)")
    importance, measured = roles.importance, roles.roles
    L, H = roles.scores[ROLES[0]].shape
    heads = sorted(((l, h) for l in range(L) for h in range(H)), key=lambda lh: -roles.strongest(*lh)[1])
    names = say("roles.columns").split("|") + say("roles.word_columns").split("|")[: len(measured) - len(ROLES)]
    names += say("roles.off_columns").split("|") if importance else []
    # columns 11 wide at least: a name of two words ("이전 토큰", 9 columns) keeps two spaces from the one before
    widths = [max(11, display_width(name) + 2) for name in names]
    lines = [pad(say("roles.header"), 39) + "".join(pad(n, w, right=True) for n, w in zip(names, widths))]
    for rank, (l, h) in enumerate(heads, 1):
        role, score = roles.strongest(l, h)
        values = [roles.scores[r][l, h] for r in measured]
        cells = "".join(f"{v:>{w}.3f}" for v, w in zip(values, widths))
        if importance:
            cells += "".join(f"{v:>+{w}.3f}" for v, w in zip((importance.loss[l, h], importance.drop[l, h]),
                                                             widths[len(measured):]))
        lines.append(f"{rank:>4} {l:>5} {h:>4}  " + pad(f"{say('role.' + role)} {score:.3f}", 22) + cells)
    lines.append(pad(say("roles.chance"), 39, right=True) + "".join(f"{roles.chance[r]:>{w}.3f}"
                                                                    for r, w in zip(measured, widths)))
    lines.append(say("roles.sequences", count=SEQUENCES, n=roles.repeat, first=f"{roles.loss_first:.3f}",
                     second=f"{roles.loss_second:.3f}", drop=f"{roles.loss_drop:.3f}"))
    if importance:
        lines.append(say("roles.off", mode=say("ablate." + importance.mode), loss=f"{importance.full_loss:.3f}",
                         drop=f"{importance.full_drop:.3f}"))
    return "\n".join(lines)


def number(x) -> float | None:
    """A score as JSON has it: 6 decimals, NaN (no query to measure on) as null."""
    return None if np.isnan(x) else round(float(x), 6)


def roles_record(roles: HeadRoles) -> dict:
    """The scores as a training run records them in metrics.jsonl: role -> (L, H) nested lists, with the
    same rounding as heads.json; `roles_from_record` reads them back. With `roles.importance`, "importance" too
    (the page shows it): its mode, "loss" and "drop" (L, H) and the full model's "full_loss" and "full_drop"."""
    imp = roles.importance
    extra = {"importance": {"mode": imp.mode, "full_loss": number(imp.full_loss), "full_drop": number(imp.full_drop),
                            **{k: [[number(x) for x in row] for row in getattr(imp, k)] for k in ("loss", "drop")}}
             } if imp else {}  # fmt: skip
    return {"scores": {r: [[number(x) for x in row] for row in roles.scores[r]] for r in roles.roles},
            "chance": {r: number(roles.chance[r]) for r in roles.roles}, "repeat": roles.repeat,
            "loss_first_copy": number(roles.loss_first), "loss_second_copy": number(roles.loss_second),
            "loss_drop": number(roles.loss_drop), **extra}


def roles_from_record(record: dict, text: str = "") -> HeadRoles:
    """A HeadRoles from `roles_record`'s dict (null scores back to NaN), with its importance if it holds one."""
    def array(x):
        return np.array(x, dtype=np.float64)  # None -> nan

    measured = ROLES + tuple(r for r in WORD_ROLES if r in record["scores"])  # a record of before the word roles: none
    roles = HeadRoles({r: array(record["scores"][r]) for r in measured},
                      {r: float(array(record["chance"][r])) for r in measured},
                      float(array(record["loss_first_copy"])), float(array(record["loss_second_copy"])),
                      text, int(record["repeat"]))
    imp = record.get("importance")  # what switching each head off cost, where that evaluation measured it
    if imp:
        roles.importance = Importance(imp["mode"], array(imp["loss"]), array(imp["drop"]), float(array(imp["full_loss"])),
                                      float(array(imp["full_drop"])))
    return roles


@torch.inference_mode()
def held_out_loss(model, windows) -> float:
    """The model's mean next-token loss on held-out windows (N, T), as it runs now (heads switched off included)."""
    logits = model(windows[:, :-1], all_logits=True)[0]  # (N, T - 1, V)
    return F.cross_entropy(logits.flatten(0, 1).float(), windows[:, 1:].flatten()).item()


@torch.inference_mode()
def losses(model, windows, seqs, n: int, o: int) -> tuple[float, float]:
    """(held-out loss of windows, in-context loss drop of seqs) of the model as it runs now."""
    first, second = copy_losses(model(seqs, all_logits=True)[0], seqs, n, o)
    return held_out_loss(model, windows), first - second


def head_importance(model, text_ids, vocab_ids, eot_id, mode: str = "mean", means=None) -> Importance:
    """Every head's `Importance`, one head off at a time (the module docstring); `means` those of mode "mean"."""
    windows = held_out_windows(model, text_ids)
    seqs, n, o = induction_sequences(model, vocab_ids, eot_id)
    full_loss, full_drop = losses(model, windows, seqs, n, o)
    L, H = model.config.n_layer, model.config.n_head
    loss, drop = np.zeros((L, H)), np.zeros((L, H))
    for layer in range(L):
        for head in range(H):
            with HeadsOff(model, [(layer, head)], mode, means):
                held_out, in_context = losses(model, windows, seqs, n, o)
            loss[layer, head], drop[layer, head] = held_out - full_loss, full_drop - in_context
    return Importance(mode, loss, drop, full_loss, full_drop)


def marked_off(record: dict, off) -> dict:
    """A roles record with the heads `off` (switched off: {(layer, head): mode} or [(layer, head)]) marked: "off" names
    them ("L.H") and their role scores and costs are null, for an off head has no role (its attention's output never
    reaches the model) and no cost of its own (it is off already), not scores and costs of 0 like a live head's."""
    if not off:
        return record
    tables = [*record["scores"].values(), *[record["importance"][k] for k in ("loss", "drop") if record.get("importance")]]
    for layer, head in off:
        for table in tables:
            table[layer][head] = None
    return {**record, "off": [head_name(layer, head) for layer, head in sorted(off)]}


def record(run, settings, off=()) -> dict:
    """Every head's role scores on the held-out text (settings.heads_text, a file, else the run's validation split),
    what switching each off alone costs (settings.mode), and where that text came from ("source"); the heads `off`
    (those switched off as they are measured) marked off (`marked_off`)."""
    ids, source = held_out_ids(run, settings.heads_text)
    roles = measure_heads(run.model, ids, usable_ids(run), run.eot_id, word_starts=word_start_ids(run.token_bytes))
    means = held_out_means(run, settings.heads_text) if settings.mode == "mean" else None
    roles.importance = head_importance(run.model, ids, usable_ids(run), run.eot_id, settings.mode, means)
    return {**marked_off(roles_record(roles), off), "source": source}


def text(record: dict, lang: str) -> str:
    """Where the scores were measured, and the heads ranked by their strongest role (`format_roles_table`)."""
    return "\n".join([messages(lang)("roles.title", where=where(record["source"], lang)),
                      format_roles_table(roles_from_record(record), lang)])
