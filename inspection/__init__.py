"""Look inside a run: every view of a text (attention maps of every layer and head, one head's Q·K·V, one token's
path, the logit lens, why a token, patching, words) and of the run (head roles), as records, text, PNGs and a page.

    from inference import load_run
    from inspection import Settings, VIEWS, compute, draw_head
    run = load_run()
    records = compute(run, "대한민국은 서울", ["maps", "walkthrough"], Settings(explain=(1, 0)))
    maps = records["maps"]                                 # ids, tokens, att (L, H, T, T), stats, trace, ...
    draw_head(maps["att"], maps["tokens"], layer=0, head=1)   # a matplotlib Figure
    print(VIEWS["walkthrough"].text(records["walkthrough"], "ko"))   # the terminal's text, in Korean
    records = compute(run, text, ["why"], Settings(query=5), off="1.0")   # with head 1.0 switched off

    trace = maps["trace"]                                  # the whole forward: tok, pos, q, k, v, att, ..., logits
    roles = measure_heads(run.model, held_out_ids(run)[0], usable_ids(run), run.eot_id)   # .scores, .strongest()

Modules: views/ (one module per view, inspection/views/__init__.py lists them; `compute` makes their records from
one recording forward, the one place heads are switched off for them), trace (the recording forward, explain.npz),
labels (readable token labels), tables (terminal text), plot (PNG), html (the offline page, from page/ and each
view's script), files (the files of --attention DIR), heldout (the text heads are measured on), over_training (one
text through every snapshot of a run), glossary (the terms in English and Korean), notebook (every view inline),
live (the live inspector: a local server of the page). Every text they print is in cli/messages.py, in English and
Korean.
"""

from inspection.files import AttentionMaps, load_npz, write_records
from inspection.heldout import held_out_ids, usable_ids
from inspection.html import page
from inspection.labels import labeller, token_label, token_labels, token_pieces
from inspection.plot import draw_head, draw_layer, save_figure
from inspection.trace import Trace, load_trace, save_trace, trace_ids
from inspection.views import VIEWS, Settings, compute
from inspection.views.maps import head_stats
from inspection.views.patch import patch
from inspection.views.roles import HeadRoles, measure_heads
from inspection.views.why import attribute
from inspection.views.words import word_maps, word_spans
from model.sampling import Sampling  # the sampling settings the path view draws the next token with

__all__ = [
    "AttentionMaps", "HeadRoles", "Sampling", "Settings", "Trace", "VIEWS", "attribute", "compute", "draw_head",
    "draw_layer", "head_stats", "held_out_ids", "labeller", "load_npz", "load_trace", "measure_heads", "page", "patch",
    "save_figure", "save_trace", "token_label", "token_labels", "token_pieces", "trace_ids", "usable_ids",
    "word_maps", "word_spans", "write_records",
]
