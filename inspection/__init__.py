"""Look inside a run: attention maps of every layer and head, their labels, statistics, PNG grids and an offline page.

    from inference import load_run
    from inspection import attention_for_text, draw_head, head_stats, format_stats_table
    maps = attention_for_text(load_run(), "대한민국은 서울")  # .weights (L, H, T, T), .labels
    draw_head(maps.weights, maps.labels, layer=0, head=1)   # a matplotlib Figure
    print(format_stats_table(head_stats(maps.weights)))

Modules: maps (attention of a text + the files), labels (readable token labels), stats (per-head
statistics), plot (PNG), html (interactive page, template page.html).
"""

from inspection.html import attention_page, save_html
from inspection.labels import token_label, token_labels, token_pieces
from inspection.maps import AttentionMaps, attention_for_ids, attention_for_text, load_npz, save_npz, write_attention
from inspection.plot import draw_head, draw_layer, save_figure
from inspection.stats import format_stats_table, format_top_attended, head_stats

__all__ = [
    "AttentionMaps", "attention_for_ids", "attention_for_text", "attention_page", "draw_head", "draw_layer",
    "format_stats_table", "format_top_attended", "head_stats", "load_npz", "save_figure", "save_html", "save_npz",
    "token_label", "token_labels", "token_pieces", "write_attention",
]
