"""The live inspector's model side: the page's view of a text, and a generation that streams views, each cut
into the steps the model thread runs (inspection/live_worker.py); inspection/live_server.py serves them.

    inspector = LiveInspector(run)
    steps = inspector.inspect({"text": "대한민국"})      # checked now (BadRequest), computed a step at a time
    (status, view), = steps                             # one step: the view
    for line in inspector.generate({"text": "대한민국", "max_new_tokens": 20}): ...   # one step per token

Requests (JSON objects):

    inspect   {"text", "temperature", "top_k", "top_p", "explain", "ablate"} -> the text's view: its tokens,
              every layer and head's map, with the walkthrough's tensors unless "explain" is false
              (html.frame_data, explain.npz's numbers; most of the bytes, so the page asks for them only
              when a token is clicked), each head's role scores, the statistics, the next token's top 10,
              every token's logit lens and "model_ms"; "ablate", a list of [layer, head] pairs, switches
              those heads off (their mean output on held-out text, model/ablation.py): then the view is the
              ablated model's, with the full model's next-token probabilities ("p_full") and held-out loss
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

from inference.runs import Run
from inference.textgen import stream_text
from inspection.heads import measure_heads
from inspection.heldout import held_out_ids, usable_ids
from inspection.importance import ablation_means, held_out_windows
from inspection.lens import labeller, lens_table
from inspection.html import frame_data, path_data
from inspection.labels import token_labels
from inspection.maps import attention_for_ids, attention_from_decoding
from inspection.path import forward_path
from inspection.trace import trace_ids
from inspection.words import word_start_ids
from model.ablation import ablated, check_heads
from model.errors import UserError
from model.sampling import TEMPERATURE, Sampling, sampling_probs

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


def next_probs(trace, sampling: Sampling) -> torch.Tensor:
    """The next token's probabilities after a recorded text under the sampling settings: (V,)."""
    return sampling_probs(torch.from_numpy(trace.logits[-1:]), sampling.temperature, sampling.top_k, sampling.top_p)[0]


class LiveInspector:
    """The model side: views of texts and generations, one at a time (see the module docstring)."""

    def __init__(self, run: Run, lang: str = "en"):
        self.run, self.lang = run, lang
        self.layers = list(range(run.model.config.n_layer))
        # every head's roles do not depend on the text: measured once, on the run's held-out text, which also
        # gives a switched-off head its mean output and the held-out loss the page compares
        held_out = held_out_ids(run, lang=lang)[0]
        try:
            self.roles = measure_heads(run.model, held_out, usable_ids(run), run.eot_id,
                                       word_starts=word_start_ids(run.token_bytes))
        except UserError:  # a context under 5 tokens holds no induction test: the page shows no roles, as
            self.roles = None  # --attention does for such a model, and everything else as for any other
        self.windows = held_out_windows(run.model, held_out)
        self.means = ablation_means(run.model, held_out)
        self.full_loss = self.held_out_loss()
        self.label = labeller(run.tokenizer)  # every token's label, made once

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
        """The heads the page switched off: "ablate", a list of [layer, head] pairs (model.ablation.check_heads)."""
        pairs = body.get("ablate", [])
        if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 and all(
                isinstance(x, int) and not isinstance(x, bool) for x in p) for p in pairs):  # fmt: skip
            raise BadRequest("ablate must be a list of [layer, head] pairs of whole numbers")
        try:
            return check_heads(self.run.model, pairs)
        except UserError as e:
            raise BadRequest(str(e)) from None

    @torch.inference_mode()
    def held_out_loss(self) -> float:
        """The model's mean next-token loss on the held-out windows, as it runs now (heads off included)."""
        logits = self.run.model(self.windows[:, :-1], all_logits=True)[0]
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), self.windows[:, 1:].flatten()).item()

    def sampling(self, body: dict) -> Sampling:
        try:
            return Sampling(number(body, "temperature", TEMPERATURE, float, 0.0, 100.0),
                            number(body, "top_k", None, int, 1, self.run.model.config.vocab_size),
                            number(body, "top_p", None, float, 0.0, 1.0))
        except UserError as e:
            raise BadRequest(str(e)) from None

    @torch.inference_mode()
    def view(self, ids: list[int], sampling: Sampling, recorded=None, explain: bool = True, full=None,
             lens: bool = True) -> dict:
        """The page's data for ids: tokens, one frame (maps, statistics, roles, walkthrough tensors), the next
        token's top candidates, every token's logit lens, all from one recording forward (inspection/trace.py);
        `recorded`: the maps of a cached decoding (inspection.maps.attention_from_decoding), whose rows the view
        keeps. `full`: the full model's next-token probabilities, when this runs with heads switched off: then
        each candidate's "p_full" and the "held_out" loss beside the full's."""
        run = self.run
        maps = attention_from_decoding(run, ids, recorded) if recorded else attention_for_ids(run, ids)
        trace = maps.trace if maps.trace is not None else trace_ids(run.model, maps.ids)
        frame = frame_data(maps.att, self.layers, trace=trace if explain else None, roles=self.roles, off=trace.off)
        probs = next_probs(trace, sampling)
        p, top = probs.topk(min(TOP, probs.numel()))
        candidates = [{"id": i, "token": label, "p": round(float(q), 6)}
                      for i, label, q in zip(top.tolist(), token_labels(run.tokenizer, top.tolist()), p.tolist())]
        view = {"tokens": maps.labels, "T": len(maps.ids), "prefill": maps.prefill or len(maps.ids),
                "frames": [frame], "next": candidates}
        if lens:  # every token's logit lens and path: left out of a generation's lines but its last
            view["lens"] = lens_table(run.model, trace, self.label)
            first = 0 if explain else len(maps.ids) - 1  # every token's with the walkthrough's, else the last's
            decoding = replace(sampling, eos_token_id=run.eot_id)  # as stream_text decodes
            view["path"] = path_data(forward_path(run.model, trace, self.label, decoding, first), trace)
        if full is not None:
            for c in candidates:
                c["p_full"] = round(float(full[c["id"]]), 6)
            view["held_out"] = {"loss": round(self.held_out_loss(), 6), "full": round(self.full_loss, 6)}
        return view

    def inspect(self, body: dict):
        """The steps of an inspect (one: (200, view)), its request checked now."""
        ids, sampling, off = self.encode(body), self.sampling(body), self.switched_off(body)
        explain = body.get("explain", True)
        if not isinstance(explain, bool):
            raise BadRequest(f"explain must be true or false, not {str(explain)[:40]}")

        def steps():
            started = time.perf_counter()
            full = next_probs(trace_ids(self.run.model, ids), sampling) if off else None
            with ablated(self.run.model, off, self.means):
                view = self.view(ids, sampling, explain=explain, full=full)
            view["model_ms"] = round(1000 * (time.perf_counter() - started), 1)
            yield 200, view

        return steps()

    def generate(self, body: dict):
        """The steps of a generation: one line per new token, the view so far in each; the last line complete.
        The heads it switches off are off only within each step."""
        ids, sampling, off = self.encode(body), self.sampling(body), self.switched_off(body)
        room = self.run.block_size - len(ids)
        wanted = number(body, "max_new_tokens", 50, int, 0, MAX_NEW)
        seed = number(body, "seed", None, int, 0, 2**63 - 1)

        def steps():
            recorded, new, text = [], [], ""
            tokens = stream_text(self.run, ids, min(wanted, room), sampling=replace(sampling, seed=seed),
                                 attention=recorded)
            while True:
                with ablated(self.run.model, off, self.means):
                    step, pieces = next(tokens, (None, None))
                    if step is None:
                        final = self.view(ids + new, sampling, recorded) if new else self.view(ids, sampling)
                        break
                    new += step
                    text += pieces[0]
                    view = self.view(ids + new, sampling, recorded, explain=False, lens=False) if step else None
                    line = {"piece": pieces[0], "view": view} if step else None
                if line:
                    yield line
            yield {"done": True, "text": text, "view": final}

        return steps()
