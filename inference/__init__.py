"""Use a trained run: load it, generate text, score text. The functions behind `generate.py`, for notebooks:

    from inference import load_run, generate_text, score_text
    run = load_run()                                   # most recent run under runs/ (or load_run("runs/x"))
    print(generate_text(run, "대한민국은", max_new_tokens=50, seed=0)[0])
    score = score_text(run, "서울은 대한민국의 수도이다.")  # .loss .perplexity .bits_per_char .chars_per_token

Modules: runs (find and load a checkpoint), textgen (stream/generate whole characters), scoring.
Attention maps of a run are in the `inspection` package.
"""

from inference.runs import Run, find_latest_run, load_run
from inference.scoring import Score, score_file, score_text
from inference.textgen import Utf8Stream, generate_text, stream_text

__all__ = ["Run", "Score", "Utf8Stream", "find_latest_run", "generate_text", "load_run", "score_file", "score_text",
           "stream_text"]
