"""Hugging Face GPT-2, both ways: the name table (gpt2_names), import (import_gpt2: KoGPT2 -> a checkpoint
dir), export (export_gpt2: a run -> a transformers directory), and pretrained (open ours or theirs to start from).

    python -m hf.import_gpt2 kogpt2 ckpt/kogpt2
    python -m hf.export_gpt2 runs/small exports/small
"""
