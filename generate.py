"""Write, score and inspect text with a trained run.

    python generate.py --prompt "대한민국은"                       # stream from the most recent run in runs/
    python generate.py --ckpt runs/small --prompt "서울" --num-samples 3 --seed 0 --top-p 0.9
    python generate.py                                            # prompts from stdin, one per line
    python generate.py --score article.txt                        # loss, perplexity, bits per character
    python generate.py --prompt "대한민국의 수도는" --attention out/ --head 1.0

--attention writes layer_<L>.png, attention.html (open it in any browser, offline) and attention.npz,
and prints one row of statistics per head (defined in inspection/stats.py). The work is done by the
`inference` and `inspection` packages, whose functions are the same in a notebook.
"""

import argparse
import os
import sys

from inspection.maps import attention_for_ids, check_head, write_attention
from inference.runs import check_text, load_run
from inference.scoring import read_text, score_text
from inspection.stats import format_stats_table, format_top_attended, head_stats
from inference.textgen import TEMPERATURE, check_sampling, stream_text
from model.errors import UserError, print_error


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, like every other bad input
        raise UserError(f"{message}; see python generate.py --help")


def parse_args(argv):
    p = Parser(description="Generate text, score a file, or draw attention maps with a trained run.")
    p.add_argument("--prompt", help="text to continue (default: read prompts from stdin, one per line)")
    p.add_argument("--ckpt", help="run dir (runs/NAME) or checkpoint dir; default: the most recent run")
    p.add_argument("--runs-dir", default="runs", help="where to look for the most recent run")
    p.add_argument("--device", default="auto", help="auto (cuda, mps, cpu), cpu, cuda, cuda:1, mps")
    p.add_argument("--max-new-tokens", type=int, help="tokens to generate (default 200; 0 with --attention)")
    p.add_argument("--temperature", type=float, default=TEMPERATURE, help=f"0 = greedy (default {TEMPERATURE})")
    p.add_argument("--top-k", type=int, help="sample from the k most likely tokens only")
    p.add_argument("--top-p", type=float, help="sample from the smallest set with probability >= p, in (0, 1]")
    p.add_argument("--repetition-penalty", type=float, default=1.0, help="> 1 discourages repeats")
    p.add_argument("--seed", type=int, help="same seed, same text")
    p.add_argument("--num-samples", type=int, default=1, help="samples decoded together as a batch")
    p.add_argument("--no-cache", action="store_true", help="recompute the context each step (the reference)")
    p.add_argument("--score", metavar="FILE", help="score a UTF-8 text file instead of generating")
    p.add_argument("--attention", metavar="OUT_DIR", help="write attention maps of the prompt (+ generated text)")
    p.add_argument("--head", metavar="L.H", help="print the tokens each query of head H in layer L attends to")
    return p.parse_args(argv)


def parse_head(text: str) -> tuple[int, int]:
    layer, dot, head = text.partition(".")
    if not (dot and layer.isdigit() and head.isdigit()):
        raise UserError(f"--head {text!r} must be LAYER.HEAD with two numbers, e.g. --head 0.1")
    return int(layer), int(head)


def print_generation(run, prompt: str, args) -> list[int]:
    """Stream the continuation(s) of `prompt` to stdout; return the ids of the first sample."""
    ids = run.encode_prompt(prompt)
    n, new, texts = args.num_samples, [], [""] * args.num_samples
    options = dict(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                   repetition_penalty=args.repetition_penalty, seed=args.seed, use_cache=not args.no_cache)
    if n == 1:
        print(prompt, end="", flush=True)
    for step, pieces in stream_text(run, ids, args.max_new_tokens, n, **options):
        new += step[:1]
        if n == 1:
            print(pieces[0], end="", flush=True)
        texts = [t + p for t, p in zip(texts, pieces)]
    if n == 1:
        print()
    for k, text in enumerate(texts if n > 1 else []):
        print(f"--- sample {k + 1} of {n} ---\n{prompt}{text}")
    # The first sample's tokens up to its end-of-text (other rows may have run on).
    return ids + (new[: new.index(run.eot_id) + 1] if run.eot_id in new else new)


def inspect_attention(run, ids: list[int], args, head) -> None:
    maps = attention_for_ids(run, ids)
    if args.attention:
        # The window may start inside a character; its leftover bytes are left out of the title.
        text = b"".join(run.token_bytes[i] for i in maps.ids).decode("utf-8", errors="ignore")
        title = f"Attention maps of {run.ckpt_dir}: {text[:60] + '…' if len(text) > 60 else text}"
        written = write_attention(maps, args.attention, title)
        print(f"wrote {', '.join(str(p) for p in written)}")
    print(f"attention statistics per head over {len(maps.ids)} tokens (inspection/stats.py defines them):")
    print(format_stats_table(head_stats(maps.weights)))
    if head is not None:
        print(f"layer {head[0]} head {head[1]}: the tokens each query attends to most")
        print(format_top_attended(maps.head(*head), maps.labels))


def print_score(run, path: str, text: str) -> None:
    s = score_text(run, text, progress=True)
    print(f"scored {path} with {run.ckpt_dir}: {s.chars} characters, {s.tokens} tokens")
    print(f"token loss:           {s.loss:.4f} nats\nperplexity:           {s.perplexity:.4f}")
    print(f"bits per character:   {s.bits_per_char:.4f}\ncharacters per token: {s.chars_per_token:.4f}")


def run_prompts(run, prompts, args, head) -> None:
    for prompt in prompts:
        ids = print_generation(run, prompt, args) if args.max_new_tokens > 0 else run.encode_prompt(prompt)
        if args.attention or head is not None:
            inspect_attention(run, ids, args, head)


def stdin_prompts():
    """Non-empty lines of stdin, with a "> " prompt on a terminal; ends at end of input."""
    while True:
        if sys.stdin.isatty():
            print("> ", end="", file=sys.stderr, flush=True)
        try:
            line = sys.stdin.readline()
        except UnicodeDecodeError:
            raise UserError("standard input is not UTF-8; type or pipe UTF-8 text") from None
        if not line:
            return
        check_text(line, "standard input")
        if line.rstrip("\r\n"):
            yield line.rstrip("\r\n")


def main(argv=None) -> int:
    try:
        args = parse_args(argv)
        inspecting = args.attention is not None or args.head is not None
        if args.max_new_tokens is None:
            args.max_new_tokens = 0 if inspecting else 200
        check_sampling(args.temperature, args.top_k, args.top_p, args.repetition_penalty,
                       args.max_new_tokens, args.num_samples, seed=args.seed)
        if args.prompt == "":
            raise UserError('the prompt is empty; give some text, e.g. --prompt "대한민국은"')
        if inspecting and args.prompt is None:
            raise UserError("--attention and --head need --prompt TEXT to look at")
        if args.score is not None and (args.prompt is not None or inspecting):
            raise UserError("--score scores a file; use it without --prompt, --attention and --head")
        head = parse_head(args.head) if args.head is not None else None
        text = read_text(args.score) if args.score is not None else None
        run = load_run(args.ckpt, args.runs_dir, args.device)
        if head is not None:  # before generating anything
            check_head(run.model.config.n_layer, run.model.config.n_head, *head)
        if text is not None:
            print_score(run, args.score, text)
        else:
            run_prompts(run, [args.prompt] if args.prompt is not None else stdin_prompts(), args, head)
        return 0
    except UserError as e:
        print_error(e)
        return 2
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (| head): stop quietly, as other Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
