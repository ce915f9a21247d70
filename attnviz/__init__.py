"""Use a trained run: generate text, score text, and inspect what every attention head looks at.

The functions behind `generate.py`, for notebooks:

    from attnviz import *
    run = load_run()                                   # most recent run under runs/ (or load_run("runs/x"))
    print(generate_text(run, "대한민국은", max_new_tokens=50, seed=0)[0])
    score = score_text(run, "서울은 대한민국의 수도이다.")  # .loss .perplexity .bits_per_char .chars_per_token
    maps = attention_for_text(run, "대한민국은 서울")     # .weights (L, H, T, T), .labels
    draw_head(maps.weights, maps.labels, layer=0, head=1)  # a matplotlib Figure
    print(format_stats_table(head_stats(maps.weights)))

Modules: runs (load), textgen (stream/generate), scoring, maps (attention + files), labels,
stats (per-head statistics), plot (PNG), html (interactive page, template page.html).
"""

from attnviz.html import attention_page, save_html
from attnviz.labels import token_label, token_labels, token_pieces
from attnviz.maps import AttentionMaps, attention_for_ids, attention_for_text, load_npz, save_npz, write_attention
from attnviz.plot import draw_head, draw_layer, save_figure
from attnviz.runs import Run, find_latest_run, load_run
from attnviz.scoring import Score, score_file, score_text
from attnviz.stats import format_stats_table, format_top_attended, head_stats
from attnviz.textgen import Utf8Stream, generate_text, stream_text

__all__ = [
    "AttentionMaps", "Run", "Score", "Utf8Stream", "attention_for_ids", "attention_for_text", "attention_page",
    "draw_head", "draw_layer", "find_latest_run", "format_stats_table", "format_top_attended", "generate_text",
    "head_stats", "load_npz", "load_run", "save_figure", "save_html", "save_npz", "score_file", "score_text",
    "stream_text", "token_label", "token_labels", "token_pieces", "write_attention",
]
