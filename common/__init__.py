"""What several packages share and none owns: switching heads off (heads_off.py). It imports nothing of the
project but model/."""
