"""How much of a repeated text's prediction comes back when some heads of the clean run are patched in.

    python bench/patch_repeated.py --ckpt runs/heads/best --heads 1.0,1.1,1.2,1.3 --texts 12 --seed 7

Each text: seven random syllables that are one token each, with and without a leading space, then the first six
again ("가 나 다 라 마 바 사 가 나 다 라 마 바"): the model should predict the seventh from the first copy. The
corrupted text has seven other syllables in the first copy. For each text it prints the two logit differences and
what `inspection.views.patch.patch` (the function behind `generate.py --patch`) restores: the --heads together, and
every head alone. Then, for each head alone and for the group, the median, least and most over the texts.
"""

import argparse
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from inference import load_run  # noqa: E402
from inspection.views.patch import patch  # noqa: E402


def one_token_syllables(run) -> list[str]:
    """Hangul syllables that encode to one token both alone and after a space (after the prompt's <|endoftext|>)."""
    syllables = (chr(c) for c in range(0xAC00, 0xD7A4))
    return [s for s in syllables if len(run.encode_prompt(s)) == 2 and len(run.encode_prompt(" " + s)) == 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ckpt", required=True, help="a run's checkpoint directory (best/ or last/)")
    parser.add_argument("--heads", required=True, help="LAYER.HEAD,... patched together")
    parser.add_argument("--texts", type=int, default=12)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    run = load_run(args.ckpt)
    group = [tuple(int(x) for x in h.split(".")) for h in args.heads.split(",")]
    pool, rng = one_token_syllables(run), random.Random(args.seed)
    found: dict[str, list[float]] = {}
    for _ in range(args.texts):
        first, other = rng.sample(pool, 7), rng.sample(pool, 7)
        clean, corrupt = " ".join(first + first[:6]), " ".join(other + first[:6])
        record = patch(run.model, run.encode_prompt(clean), run.encode_prompt(corrupt), heads=group)
        restored = {"together": record["together"], **record["heads"]}
        for name, value in restored.items():
            found.setdefault(name, []).append(value)
        print(f"{clean}  clean {record['clean_diff']:6.2f}  corrupt {record['corrupt_diff']:6.2f}  "
              + "  ".join(f"{name} {value:+.2f}" for name, value in restored.items()))
    print(f"\nrestored over {args.texts} texts (median, least, most):")
    for name, values in found.items():
        print(f"{name:>9}  {statistics.median(values):+.3f}  {min(values):+.3f}  {max(values):+.3f}")


if __name__ == "__main__":
    main()
