"""Look inside a run: attention maps of every layer and head, their labels, statistics, PNG grids and an offline page.

    from inference import load_run
    from inspection import attention_for_text, draw_head, head_stats, format_stats_table
    run = load_run()
    maps = attention_for_text(run, "대한민국은 서울")        # .att (L, H, T, T), .labels, .trace
    draw_head(maps.att, maps.labels, layer=0, head=1)   # a matplotlib Figure
    print(format_stats_table(head_stats(maps.att)))

    trace = maps.trace                                    # the whole forward: tok, pos, q, k, v, att, ..., logits
    print(explain_head(trace, maps.labels, layer=1, head=0, query=-1))
    print(format_path(forward_path(run.model, trace, labeller(run.tokenizer)), query=-1))  # id to next token
    print(format_attribution(attribute(run.model, trace, query=-1), labeller(run.tokenizer)))  # why that token
    clean, corrupt = run.encode_prompt("가 나 다 가 나"), run.encode_prompt("라 마 다 가 나")
    print(format_patch(patch(run.model, clean, corrupt), str, [str(i) for i in clean]))  # which parts carry it
    roles = measure_heads(run.model, held_out_ids(run)[0], usable_ids(run), run.eot_id)  # .scores, .strongest()

Modules: maps (attention of a text + the files), labels (readable token labels), stats (per-head
statistics), plot (PNG), html (interactive page, from page/), trace (one recording forward: every step of
the pass, explain.npz), explain (one head at one query, step by step), path (one token from its id to the next
token), glossary (the terms in English and Korean), heads (what each head does),
heldout (the text heads are measured on), over_training (one text through every snapshot of a run), attribution
(why this token: each part's share of a logit difference), patching (which streams and heads carry a difference
between two texts), words (Korean words, 어절, as units), live (the live inspector: a local server of the page). Every text they print is in cli/messages.py, in English and Korean.
"""

from inspection.attribution import attribute, format_attribution
from inspection.explain import explain_head
from inspection.heads import HeadRoles, format_roles_table, measure_heads, save_roles
from inspection.heldout import held_out_ids, usable_ids
from inspection.html import Views, attention_page, save_html
from inspection.labels import token_label, token_labels, token_pieces
from inspection.lens import labeller
from inspection.maps import (AttentionMaps, attention_for_ids, attention_for_text, attention_from_decoding, load_npz,
                             save_npz, write_attention)
from inspection.patching import format_patch, patch
from inspection.path import format_path, forward_path
from inspection.plot import draw_head, draw_layer, save_figure
from inspection.stats import format_stats_table, format_top_attended, head_stats
from inspection.trace import Trace, load_trace, save_trace, trace_ids
from inspection.words import word_maps, word_spans
from model.sampling import Sampling  # the sampling settings the path view draws the next token with

__all__ = [
    "AttentionMaps", "HeadRoles", "Sampling", "Trace", "attribute", "format_attribution", "format_patch", "patch",
    "word_maps", "word_spans", "attention_for_ids", "attention_for_text", "attention_from_decoding",
    "attention_page", "draw_head", "draw_layer", "explain_head", "format_roles_table", "format_stats_table",
    "format_path", "format_top_attended", "forward_path", "head_stats", "held_out_ids", "labeller", "load_npz", "load_trace", "measure_heads", "save_figure",
    "save_html", "save_npz", "save_roles", "save_trace", "token_label", "token_labels", "token_pieces", "trace_ids",
    "usable_ids", "Views", "write_attention",
]
