"""The live inspector's model side: the page's view of a text, and a generation that streams views, each cut
into the steps the model thread runs (inspection/live_worker.py); inspection/live_server.py serves them.

    inspector = LiveInspector(run)
    steps = inspector.inspect({"text": "대한민국"})      # checked now (BadRequest), computed a step at a time
    (status, view), = steps                             # one step: the view
    for line in inspector.generate({"text": "대한민국", "max_new_tokens": 20}): ...   # one step per token

Requests (JSON objects):

    inspect   {"text", "temperature", "top_k", "top_p", "explain", "ablate"} -> the text's view: its tokens,
              every layer and head's map, with the walkthrough's tensors unless "explain" is false
              (html.frame, explain.npz's numbers; most of the bytes, so the page asks for them only
              when a token is clicked), each head's role scores, the statistics, the next token's top 10,
              every token's logit lens and "model_ms"; "ablate", a list of [layer, head] pairs, switches
              those heads off (their mean output on held-out text, common/heads_off.py): then the view is the
              ablated model's, with the full model's next-token probabilities ("p_full": its top 10 kept in the list, before the
              ablated model's new ones) and held-out loss
    generate  {"text", "max_new_tokens", "temperature", "top_k", "top_p", "seed", "ablate"} -> one object per
              new token: its text and the view so far, each row of a generated token as the KV cache computed
              it; the last holds the whole view

A text may hold at most the model's block_size tokens, a generation block_size tokens in all; every number is
bounded before use. Switched-off heads are switched on again between two steps, so the steps of other
clients, run in between, see the whole model.
"""

import math
import time
from dataclasses import replace

import torch

from cli.errors import UserError
from common.heads_off import HeadsOff, read_heads
from inference.runs import Run
from inference.textgen import stream_text
from inspection.heldout import held_out_ids, held_out_means, held_out_windows, usable_ids
from inspection.html import frame, opening, path_data
from inspection.labels import token_labels
from inspection.views import Settings, compute
from inspection.views.roles import held_out_loss, measure_heads, roles_record
from inspection.views.words import word_start_ids
from model.sampling import MAX_SEED, TEMPERATURE, Sampling, sampling_probs

FIRST_TEXT = "대한민국 국회는 법률을 제정한다. 대한민국 국회는"  # what the page opens on
TOP = 10  # next-token candidates shown
MAX_NEW = 200  # tokens a Generate may ask for (block_size bounds it too)
DEBOUNCE_MS = 60  # the page asks for a view this long after the last keystroke


class BadRequest(UserError):
    """A request the server refuses with a 4xx and one line."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def number(body: dict, name: str, default, kind=float, low=None, high=None):
    """body[name] as `kind` (None allowed where the default is None), or BadRequest naming it."""
    value = body.get(name, default)
    if value is None and default is None:
        return None
    whole = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value) and value.is_integer())
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not whole) or (
            isinstance(value, float) and not math.isfinite(value)):  # fmt: skip
        raise BadRequest(f"{name} must be {'a whole number' if kind is int else 'a finite number'}, not {str(value)[:40]}")
    if (low is not None and value < low) or (high is not None and value > high):  # ints of any size compare exactly
        raise BadRequest(f"{name} = {str(value)[:40]} must be between {low} and {high}")
    return kind(value)


def fitting_text(run: Run, text: str) -> str:
    """`text` cut at its end to what the model reads (its block_size tokens, <|endoftext|> first), with no warning."""
    while len(text) > 1 and len(run.encode_document(text)) > run.block_size:
        text = text[:-1]
    return text


def next_probs(trace, sampling: Sampling) -> torch.Tensor:
    """The next token's probabilities after a recorded text under the sampling settings: (V,)."""
    return sampling_probs(torch.from_numpy(trace.logits[-1:]), sampling.temperature, sampling.top_k, sampling.top_p)[0]


class LiveInspector:
    """The model side: views of texts and generations, one at a time (see the module docstring)."""

    def __init__(self, run: Run):
        self.run = run
        self.layers = list(range(run.model.config.n_layer))
        # every head's roles do not depend on the text: measured once, on the run's held-out text, which also
        # gives a switched-off head its mean output and the held-out loss the page compares
        held_out = held_out_ids(run)[0]
        try:
            self.roles = roles_record(measure_heads(run.model, held_out, usable_ids(run), run.eot_id,
                                                    word_starts=word_start_ids(run.token_bytes)))
        except UserError:  # a context under 5 tokens holds no induction test: the page shows no roles, as
            self.roles = None  # --attention does for such a model, and everything else as for any other
        self.windows = held_out_windows(run.model, held_out)
        self.means = held_out_means(run)
        self.full_loss = held_out_loss(run.model, self.windows)

    def encode(self, body: dict) -> list[int]:
        """The request's text as token ids (the <|endoftext|> first), at most block_size of them."""
        text = body.get("text")
        if not isinstance(text, str):
            raise BadRequest(f"text must be a string, not {type(text).__name__}")
        try:
            ids = self.run.encode_document(text)
        except UserError as e:  # not text (a lone surrogate)
            raise BadRequest(str(e)) from None
        if not ids:
            raise BadRequest("the text is empty; type some")
        block = self.run.block_size
        if len(ids) > block:
            raise BadRequest(f"the text is {len(ids)} tokens with <|endoftext|>; this model reads at most {block} "
                             f"(its block_size): shorten it", 413)
        return ids

    def switched_off(self, body: dict) -> list[tuple[int, int]]:
        """The heads the page switched off: "ablate", a list of [layer, head] pairs (common.heads_off.read_heads)."""
        pairs = body.get("ablate", [])
        if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 and all(
                isinstance(x, int) and not isinstance(x, bool) for x in p) for p in pairs):  # fmt: skip
            raise BadRequest("ablate must be a list of [layer, head] pairs of whole numbers")
        try:
            return read_heads(pairs, "ablate", self.run.model.config) if pairs else []
        except UserError as e:
            raise BadRequest(str(e)) from None

    def sampling(self, body: dict) -> Sampling:
        try:
            return Sampling(number(body, "temperature", TEMPERATURE, float, 0.0, 100.0),
                            number(body, "top_k", None, int, 1, self.run.model.config.vocab_size),
                            number(body, "top_p", None, float, 0.0, 1.0))
        except UserError as e:
            raise BadRequest(str(e)) from None

    @torch.inference_mode()
    def view(self, ids: list[int], sampling: Sampling, recorded=None, explain: bool = True, full=None,
             lens: bool = True, off=()) -> dict:
        """The page's data for ids: tokens, one frame (maps, statistics, roles, walkthrough tensors), the next
        token's top candidates, every token's logit lens and path, all from one recording forward (compute) with
        the heads `off` switched off; `recorded`: the maps of a cached decoding, whose rows the view keeps. `full`:
        the full model's next-token probabilities, when heads are off: then each candidate's "p_full" and the
        "held_out" loss beside the full's."""
        run = self.run
        names = ["maps"] + (["walkthrough"] if explain else []) + (["lens", "path"] if lens else [])
        settings = Settings(sampling=sampling, last_only=not explain)  # a generation's path: the last token's
        records = compute(run, ids, names, settings, list(off) or None, recorded)
        maps = records["maps"]
        probs = next_probs(maps["trace"], sampling)
        top = probs.topk(min(TOP, probs.numel())).indices.tolist()
        if full is not None:  # before and after: the full model's top tokens kept, then the ones new to the top
            former = full.topk(min(TOP, full.numel())).indices.tolist()
            top = former + [i for i in top if i not in former]
        candidates = [{"id": i, "token": label, "p": round(float(probs[i]), 6)}
                      for i, label in zip(top, token_labels(run.tokenizer, top))]
        view = {"tokens": maps["tokens"], "T": len(maps["ids"]), "prefill": maps["prefill"],
                "frames": [frame({**records, "roles": self.roles} if self.roles else records, self.layers)],
                "next": candidates, "open": opening({**records, "roles": self.roles}, self.layers)}
        if lens:  # every token's logit lens and path: left out of a generation's lines but its last
            view["lens"], view["path"] = records["lens"], path_data(records["path"])
        if full is not None:
            for c in candidates:
                c["p_full"] = round(float(full[c["id"]]), 6)
            with HeadsOff(run.model, off, "mean", self.means):
                view["held_out"] = {"loss": round(held_out_loss(run.model, self.windows), 6),
                                    "full": round(self.full_loss, 6)}
        return view

    def inspect(self, body: dict):
        """The steps of an inspect (one: (200, view)), its request checked now."""
        ids, sampling, off = self.encode(body), self.sampling(body), self.switched_off(body)
        explain = body.get("explain", True)
        if not isinstance(explain, bool):
            raise BadRequest(f"explain must be true or false, not {str(explain)[:40]}")

        def steps():
            started = time.perf_counter()
            full = next_probs(compute(self.run, ids, ["maps"])["maps"]["trace"], sampling) if off else None
            view = self.view(ids, sampling, explain=explain, full=full, off=off)
            view["model_ms"] = round(1000 * (time.perf_counter() - started), 1)
            yield 200, view

        return steps()

    def generate(self, body: dict):
        """The steps of a generation: one line per new token, the view so far in each; the last line complete.
        The heads it switches off are off only within each step."""
        ids, sampling, off = self.encode(body), self.sampling(body), self.switched_off(body)
        room = self.run.block_size - len(ids)
        wanted = number(body, "max_new_tokens", 50, int, 0, MAX_NEW)
        seed = number(body, "seed", None, int, 0, MAX_SEED)

        def steps():
            recorded, new, text = [], [], ""
            tokens = stream_text(self.run, ids, min(wanted, room), sampling=replace(sampling, seed=seed),
                                 attention=recorded)
            while True:
                with HeadsOff(self.run.model, off, "mean", self.means):
                    step, pieces = next(tokens, (None, None))
                if step is None:
                    final = self.view(ids + new, sampling, recorded, off=off) if new else self.view(ids, sampling, off=off)
                    break
                new += step
                text += pieces[0]
                view = self.view(ids + new, sampling, recorded, explain=False, lens=False, off=off) if step else None
                line = {"piece": pieces[0], "view": view} if step else None
                if line:
                    yield line
            yield {"done": True, "text": text, "view": final}

        return steps()
