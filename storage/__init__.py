"""What is written to disk and read back: files written whole (atomic) and checkpoint dirs (checkpoint).

    from storage.checkpoint import load_model, save_model
"""
