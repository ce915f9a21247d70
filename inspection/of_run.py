"""The inspections of a loaded run, computed once for generate.py and for a notebook (inspection/notebook.py).

    path = token_path(run, trace, Sampling(0.8))                 # one token's way, to the token decoding draws
    views = page_views(run, maps, trace, path)                   # what the page shows beside the maps
    text = head_walkthrough(run, trace, maps.labels, 1, 0, -1)   # --explain 1.0, with this head's share of out
    roles, where = run_roles(run)                                # --heads: roles, and each one's cost when off

Each is what the command line prints or draws, so a notebook shows the same numbers as the terminal.
"""

from dataclasses import replace

from cli.messages import messages
from inspection.attribution import page_record
from inspection.explain import explain_head
from inspection.heads import HeadRoles, measure_heads
from inspection.heldout import held_out_ids, usable_ids
from inspection.html import Views
from inspection.importance import head_importance
from inspection.lens import labeller, lens_table
from inspection.path import forward_path
from inspection.words import word_spans, word_start_ids


def token_path(run, trace, sampling) -> dict:
    """forward_path of `trace`, its last step the token `sampling` draws as generate.py decodes it (the
    end-of-text token unpenalised, as stream_text does)."""
    return forward_path(run.model, trace, labeller(run.tokenizer), replace(sampling, eos_token_id=run.eot_id))


def page_views(run, maps, trace, path: dict, roles=None, patched: dict | None = None) -> Views:
    """What the page shows beside `maps`: the walkthrough's tensors, every token's lens, path and attribution,
    the words, and (given) the head roles and a patching record."""
    label = labeller(run.tokenizer)
    return Views(trace=trace, roles=roles, lens=lens_table(run.model, trace, label), paths=path,
                 why=page_record(run.model, trace, label), words=word_spans(maps.labels), patch=patched)


def page_title(run, ids: list[int], lang: str = "en") -> str:
    """The page's title: the checkpoint and the text (its first 60 characters)."""
    # The window may start inside a character; its leftover bytes are left out of the title.
    text = b"".join(run.token_bytes[i] for i in ids).decode("utf-8", errors="ignore")
    return messages(lang)("maps.title", ckpt=run.ckpt_dir, text=text[:60] + "…" if len(text) > 60 else text)


def head_walkthrough(run, trace, labels: list[str], layer: int, head: int, query: int, lang: str = "en") -> str:
    """explain_head with this model's W_O (so it shows the head's share of out) and its MLP setting."""
    w_o = run.model.blocks[layer].attn.c_proj.weight.detach().T.float().cpu().numpy()  # out = y W_O + b_O
    return explain_head(trace, labels, layer, head, query, w_o, lang, run.model.config.mlp)


def run_roles(run, heads_text: str | None = None, lang: str = "en", means=None) -> tuple[HeadRoles, str]:
    """Every head's role scores on the held-out text (`heads_text`, a file, else the run's validation split) and
    what switching each off alone costs (`means`: their mean outputs, None: zeros); and where that text came from."""
    ids, where = held_out_ids(run, heads_text, lang)
    roles = measure_heads(run.model, ids, usable_ids(run), run.eot_id, where, word_start_ids(run.token_bytes))
    roles.importance = head_importance(run.model, ids, usable_ids(run), run.eot_id, means)
    return roles, where
