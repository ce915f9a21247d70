"""Write, score and inspect text with a trained run.

    python generate.py --prompt "대한민국은"                       # stream from the most recent run in runs/
    python generate.py --ckpt runs/small --prompt "서울" --num-samples 3 --seed 0 --top-p 0.9
    python generate.py                                            # prompts from stdin, one per line
    python generate.py --score article.txt                        # loss, perplexity, bits per character
    python generate.py --prompt "대한민국의 수도는" --attention out/ --head 1.0
    python generate.py --prompt "대한민국의 수도는" --explain 1.0 --query -1   # one head, step by step
    python generate.py --heads --attention out/                   # what each head does -> out/heads.json
    python generate.py --prompt "국회는" --attention out/ --over-training runs/heads   # every snapshot, one page

--attention writes layer_<L>.png, attention.html (open it in any browser, offline), attention.npz and
explain.npz (every intermediate tensor, inspection/trace.py), and prints one row of statistics per head
(defined in inspection/stats.py). --explain walks through one head at one query token with the model's
own numbers (inspection/explain.py); --heads scores every head's role (inspection/heads.py);
--over-training draws the text at every snapshot of a run (train.snapshots) on one page with a slider
(inspection/over_training.py). The work is done by the `inference` and `inspection` packages, whose
functions are the same in a notebook.
"""

if __name__ == "__main__":  # Ctrl-C while torch loads ends with one line, not a traceback
    from cli import stop_quietly_while_loading

    stop_quietly_while_loading()

import sys
from dataclasses import dataclass, replace
from pathlib import Path

from cli.command import ArgumentParser, integer, run_command
from inference.runs import check_text, load_run, warn
from inference.scoring import read_text, score_text
from inference.textgen import check_batch, stream_text
from inspection.explain import resolve_query
from inspection.heads import format_roles_table, save_roles
from inspection.heldout import held_out_ids
from inspection.importance import MODES, ablation_means
from inspection.lens import format_lens, labeller, logit_lens
from inspection.live_server import LiveServer
from inspection.maps import (attention_for_ids, attention_from_decoding, check_head, make_out_dir, parse_head, parse_heads,
                             write_attention)
from inspection.of_run import head_walkthrough, page_title, page_views, run_roles, token_path
from inspection.over_training import format_snapshot_table, over_training_page, run_snapshots
from inspection.path import format_path
from inspection.stats import format_stats_table, format_top_attended, head_stats
from inspection.attribution import attribute, format_attribution, labels_to_ids, named, token_id
from inspection.patching import format_patch, named_patch, patch
from inspection.plot import draw_patch, save_figure
from inspection.trace import trace_ids
from inspection.words import format_word_sums, format_word_top, word_spans
from cli.messages import LANGUAGES, locale_language, messages
from model.ablation import ablated, check_heads
from model.speed.decode_weights import FORMATS
from model.sampling import TEMPERATURE, Sampling
from model.errors import UserError
from storage.atomic import write_files, write_json, write_text_atomic
from storage.checkpoint import read_config


def parse_args(argv):
    p = ArgumentParser(prog="python generate.py",
                       description="Generate text, score a file, or draw attention maps with a trained run.")
    p.add_argument("--prompt", help="text to continue (default: read prompts from stdin, one per line)")
    p.add_argument("--ckpt", help="run dir (runs/NAME) or checkpoint dir; default: the most recent run")
    p.add_argument("--runs-dir", default="runs", help="where to look for the most recent run")
    p.add_argument("--device", default="auto", help="auto (cuda, mps, cpu), cpu, cuda, cuda:1, mps")
    p.add_argument("--max-new-tokens", type=integer, help="tokens to generate (default 200; 0 with --attention)")
    p.add_argument("--temperature", type=float, default=TEMPERATURE, help=f"0 = greedy (default {TEMPERATURE})")
    p.add_argument("--top-k", type=integer, help="sample from the k most likely tokens only")
    p.add_argument("--top-p", type=float, help="sample from the smallest set with probability >= p, in (0, 1]")
    p.add_argument("--repetition-penalty", type=float, default=1.0, help="> 1 discourages repeats")
    p.add_argument("--seed", type=integer, help="same seed, same text")
    p.add_argument("--num-samples", type=integer, default=1, help="samples decoded together as a batch")
    p.add_argument("--no-cache", action="store_true", help="recompute the context each step (the reference)")
    p.add_argument("--weights", choices=FORMATS, default="fp32", help="weights of the cached decoding on a CPU: "
                   "bf16 or int8 read a half or a quarter of fp32's bytes per token (faster on a larger model; "
                   "logits near fp32's, not equal; default fp32)")
    p.add_argument("--no-speed-up", action="store_true", help="run the textbook network alone (model/gpt.py and "
                   "model/attention.py), without the speed layer (model/speed/): the same numbers, slower")
    p.add_argument("--score", metavar="FILE", help="score a UTF-8 text file instead of generating")
    p.add_argument("--attention", metavar="OUT_DIR", help="write attention maps of the prompt (+ generated text)")
    p.add_argument("--head", metavar="L.H", help="print the tokens each query of head H in layer L attends to")
    p.add_argument("--explain", metavar="L.H|path", help="walk through head H of layer L step by step, with its "
                   "numbers; path: the --query token's whole way from its id to the next token")
    p.add_argument("--query", type=integer, default=-1, help="the token --explain looks from (negative: from the end)")
    p.add_argument("--heads", action="store_true", help="score what each head does (no prompt needed)")
    p.add_argument("--heads-text", metavar="FILE", help="held-out text for --heads (default: the run's validation split)")
    p.add_argument("--ablate", metavar="L.H,...", help="switch these heads off for everything this command does, "
                   "e.g. 1.0,1.2 (model/ablation.py)")
    p.add_argument("--ablate-mode", choices=MODES, default="mean", help="what a switched-off head outputs: its mean "
                   "on held-out text (default) or zeros")
    p.add_argument("--lens", action="store_true", help="the logit lens of --prompt at its last token (or --query): "
                   "the next token after the embeddings and after each block")
    p.add_argument("--why", nargs="?", const="", metavar="A[,B]", help="why the model predicts A and not B after the "
                   "--query token: the logit difference split into every head's, MLP's and embedding's share "
                   "(default: its choice against its runner-up; a token as the tables show it, or #ID)")
    p.add_argument("--patch", metavar="TEXT", help="patch the --prompt text (clean) into TEXT (corrupted, the same "
                   "number of tokens): which streams and heads carry the difference in the next-token prediction")
    p.add_argument("--patch-heads", metavar="L.H,...", help="with --patch: these heads patched together, too")
    p.add_argument("--words", action="store_true", help="read attention by word (어절): word-level maps, and the "
                   "walkthrough's and --head's attention summed per word")
    p.add_argument("--layers", metavar="LIST", help="layers of the page and PNGs, e.g. 0,2 or 0-3 (default: all)")
    p.add_argument("--lang", choices=LANGUAGES, help="language of the walkthrough, the tables, the PNGs and the page: "
                   "ko or en (default: the locale's, ko where LANG or LC_ALL begins with ko)")
    p.add_argument("--serve", action="store_true", help="the live inspector: a local page where the maps, the "
                   "walkthrough and the next token follow a text as it is typed (Ctrl-C stops it)")
    p.add_argument("--host", help="address --serve listens on (default 127.0.0.1, this machine only)")
    p.add_argument("--port", type=integer, help="port of --serve (default 8000; 0: any free one)")
    p.add_argument("--over-training", metavar="RUN", help="with --prompt and --attention DIR: one page with a slider over "
                   "the snapshots of RUN (train.snapshots), DIR/over_training.html")
    return p.parse_args(argv)


def parse_why(text: str | None) -> tuple[str | None, str | None] | None:
    """--why "A,B" -> (A, B); "A" -> (A, None); "" -> (None, None): the model's choice and its runner-up."""
    if text is None:
        return None
    first, comma, second = text.partition(",")
    if comma and not second.strip() or not first.strip() and second.strip():
        raise UserError(f"--why {text!r} must name one token or two, as A or A,B (or nothing: the model's choice)")
    return first.strip() or None, second.strip() or None


def parse_layers(text: str, n_layer: int) -> list[int]:
    """"0,2-3" -> [0, 2, 3]; a UserError for anything else or a layer the model lacks (before a range is built)."""
    layers = set()
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        try:
            low = integer(first)
            high = integer(last) if dash else low
        except ValueError:
            low = high = -1
        if not 0 <= low <= high:
            raise UserError(f"--layers {text!r} must list layers like 0,2 or 0-3")
        if high >= n_layer:
            raise UserError(f"--layers {text!r} names a layer this model lacks; it has layers 0..{n_layer - 1}")
        layers.update(range(low, high + 1))
    return sorted(layers)


@dataclass(frozen=True)
class Look:
    """What to show of a prompt's forward: --attention DIR's files, --head's table, --explain's walkthrough
    (a (layer, head) or "path") at --query, --lens, in `lang`; `layers` of the page and PNGs (None: all)."""
    out_dir: str | None = None
    head: tuple[int, int] | None = None
    explain: tuple[int, int] | str | None = None
    query: int = -1
    lens: bool = False
    layers: list[int] | None = None
    lang: str = "en"
    why: tuple[str | None, str | None] | None = None  # --why: the two tokens named (None: the model's own)
    patch: str | None = None  # --patch: the corrupted text
    patch_heads: tuple[tuple[int, int], ...] = ()
    words: bool = False

    @property
    def maps(self) -> bool:
        """Whether the prompt's maps are drawn or read (everything here but the lens and the patching)."""
        return bool(self.out_dir) or self.head is not None or bool(self.explain) or self.why is not None or self.words


@dataclass(frozen=True)
class Request:
    """generate.py's command line, parsed and checked once: each option as the value it means."""
    lang: str
    prompt: str | None = None
    ckpt: str | None = None
    runs_dir: str = "runs"
    device: str = "auto"
    speed: bool = True  # the speed layer (model/speed/); --no-speed-up: the textbook network alone
    max_new_tokens: int = 200
    num_samples: int = 1
    sampling: Sampling = Sampling(TEMPERATURE)
    score: str | None = None
    look: Look = Look()
    layers_text: str | None = None  # --layers, read against the model once it is loaded
    heads: bool = False
    heads_text: str | None = None
    ablate: tuple[tuple[int, int], ...] = ()
    ablate_text: str | None = None
    ablate_mode: str = "mean"
    serve: tuple[str, int] | None = None  # (host, port) of --serve
    over_training: str | None = None


def parse_request(argv) -> Request:
    """The command line as a Request; a UserError for an option out of range or options that cannot go together,
    in the order a user meets them, before any model is loaded."""
    args = parse_args(argv)
    lang = args.lang or locale_language()
    if args.serve:  # before any default is filled in: what --serve does not use is refused as given
        return Request(lang, ckpt=args.ckpt, runs_dir=args.runs_dir, device=args.device, speed=not args.no_speed_up,
                       serve=serve_address(args))
    inspecting = (args.attention is not None or args.head is not None or args.explain is not None or args.heads
                  or args.lens or args.why is not None or args.patch is not None or args.words)
    max_new_tokens = (0 if inspecting else 200) if args.max_new_tokens is None else args.max_new_tokens
    sampling = Sampling(args.temperature, args.top_k, args.top_p, args.repetition_penalty, args.seed,
                        use_cache=not args.no_cache, weights=args.weights)
    if args.no_speed_up and args.weights != "fp32":
        raise UserError(f"--weights {args.weights} is a speed variant of decoding; drop it or --no-speed-up")
    check_batch(max_new_tokens, args.num_samples)
    check_inspection_options(args)
    if args.score is not None and (args.prompt is not None or inspecting) and args.over_training is None:
        raise UserError("--score scores a file; use it without --prompt, --attention, --head, --explain and --heads")
    look = Look(args.attention, parse_head(args.head) if args.head is not None else None,
                parse_head(args.explain, "--explain") if args.explain not in (None, "path") else args.explain,
                args.query, args.lens, lang=lang, why=parse_why(args.why), patch=args.patch,
                patch_heads=tuple(parse_heads(args.patch_heads, "--patch-heads")) if args.patch_heads else (),
                words=args.words)
    ablate = tuple(parse_heads(args.ablate)) if args.ablate is not None else ()
    return Request(lang, args.prompt, args.ckpt, args.runs_dir, args.device, not args.no_speed_up,
                   max_new_tokens=max_new_tokens,
                   num_samples=args.num_samples, sampling=sampling, score=args.score, look=look, layers_text=args.layers,
                   heads=args.heads, heads_text=args.heads_text, ablate=ablate, ablate_text=args.ablate,
                   ablate_mode=args.ablate_mode, over_training=args.over_training)


def print_generation(run, prompt: str, max_new_tokens: int, num_samples: int, sampling: Sampling,
                     attention: list | None = None) -> list[int]:
    """Stream the continuation(s) of `prompt` to stdout; return the ids of the first sample. `attention`:
    a list that receives the decoding's own attention maps (`model.sampling.stream_with_logits`)."""
    ids = run.encode_prompt(prompt)
    n, new, texts = num_samples, [], [""] * num_samples
    steps = stream_text(run, ids, max_new_tokens, n, sampling, attention)  # checked here, before a word is printed
    if n == 1:
        print(prompt, end="", flush=True)
    for step, pieces in steps:
        new += step[:1]
        if n == 1:
            print(pieces[0], end="", flush=True)
        texts = [t + p for t, p in zip(texts, pieces)]
    if n == 1:
        print()
    for k, text in enumerate(texts if n > 1 else []):
        print(messages(run.lang)("sample.head", k=k + 1, n=n) + f"\n{prompt}{text}")
    # The first sample's tokens up to its end-of-text (other rows may have run on).
    return ids + (new[: new.index(run.eot_id) + 1] if run.eot_id in new else new)


def inspect_attention(run, ids: list[int], look: Look, sampling: Sampling, recorded: list | None = None,
                      roles=None, patched: dict | None = None) -> None:
    """Maps of ids (from the decoding's own `recorded` forwards when given), their files, tables and walkthrough."""
    say = messages(look.lang)
    maps = attention_from_decoding(run, ids, recorded) if recorded else attention_for_ids(run, ids)
    trace = maps.trace if maps.trace is not None else trace_ids(run.model, maps.ids)  # the maps' own forward, or one
    query = resolve_query(look.query, len(maps.ids)) if look.explain else None  # before any file is written
    label = labeller(run.tokenizer)
    record = token_path(run, trace, sampling) if look.out_dir or look.explain == "path" else None
    why = why_record(run, trace, look, label) if look.why is not None else None  # before any file is written
    words = word_spans(maps.labels) if look.words else None
    if look.out_dir:
        views = page_views(run, maps, trace, record, roles, patched)
        written = write_attention(maps, look.out_dir, page_title(run, maps.ids, look.lang), layers=look.layers,
                                  lang=look.lang, views=views, words=look.words)
        if why is not None:
            written.append(write_json(Path(look.out_dir) / "why.json", named(why, label)))
        print(say("wrote", files=", ".join(str(p) for p in written)))
    if look.out_dir or look.head is not None or look.explain:  # the statistics go with the maps, not with --why alone
        print(say("stats.title", n=len(maps.ids), cells=len(maps.ids) ** 2))
        print(format_stats_table(head_stats(maps.att), look.lang))
        print(say("stats.defs"))
    if look.head is not None:
        print(say("stats.top", layer=look.head[0], head=look.head[1]))
        print(format_top_attended(maps.head(*look.head), maps.labels))
    if look.head is not None and look.words:
        print(format_word_top(maps.head(*look.head), maps.labels, words, *look.head, look.lang))
    if look.explain == "path":
        print(format_path(record, query, look.lang))
    elif look.explain:
        layer, h = look.explain
        print(head_walkthrough(run, trace, maps.labels, layer, h, query, look.lang))
        if look.words:
            print(format_word_sums(maps.head(layer, h)[query], query, maps.labels, words, look.lang))
    if why is not None:
        print(format_attribution(why, label, look.lang))


def why_record(run, trace, look: Look, label) -> dict:
    """--why's record at --query: the tokens it names (None: the model's choice, its runner-up) as ids."""
    ids = labels_to_ids(label, run.model.config.vocab_size) if any(look.why) else {}
    token, versus = (None if name is None else token_id(name, ids, run.model.config.vocab_size) for name in look.why)
    return attribute(run.model, trace, look.query, token, versus)


def print_heads(run, heads_text: str | None, out_dir: str | None, lang: str, means):
    """Score every head's role and what switching it off alone costs (`means`: of --ablate-mode mean), print the
    ranked table, write heads.json into `out_dir` (--attention) if given."""
    roles, where = run_roles(run, heads_text, lang, means)
    print(messages(lang)("roles.title", where=where))
    print(format_roles_table(roles, lang))
    if out_dir:
        print(messages(lang)("wrote", files=save_roles(roles, make_out_dir(out_dir) / "heads.json")))
    return roles


def write_over_training(r: Request) -> None:
    """--over-training RUN: the prompt's maps at every snapshot of RUN on one page, and each one's strongest heads."""
    snapshots = run_snapshots(Path(r.over_training))
    n_layer = read_config(snapshots[0]).n_layer
    layers = parse_layers(r.layers_text, n_layer) if r.layers_text else list(range(n_layer))
    page, frames, labels = over_training_page(snapshots, r.over_training, r.prompt, r.device, layers, r.lang)
    say = messages(r.lang)
    written = write_files(make_out_dir(r.look.out_dir), {"over_training.html": lambda path: write_text_atomic(path, page)},
                          UserError)  # fmt: skip
    print(say("snapshots.title", path=written[0], n=len(frames), T=len(labels)))
    print(format_snapshot_table(frames, layers, r.lang))


SERVE_USES = {"ckpt", "runs_dir", "device", "no_speed_up", "serve", "host", "port", "lang"}  # the options --serve reads


def serve_address(args) -> tuple[str, int]:
    """--serve's (host, port); a UserError for a port out of range or any option the page sets itself."""
    if args.port is not None and not 0 <= args.port <= 65535:
        raise UserError(f"--port {args.port} must be between 0 and 65535")
    untouched = vars(parse_args([]))  # what the page sets: every other option given is refused, not ignored
    others = [f"--{k.replace('_', '-')}" for k, v in vars(args).items() if k not in SERVE_USES and v != untouched[k]]
    if others:
        raise UserError(f"--serve takes its texts, sampling settings and switched-off heads from the page; drop "
                        f"{', '.join(others)}")
    return args.host or "127.0.0.1", 8000 if args.port is None else args.port


def serve(r: Request) -> None:
    """--serve: the live inspector on --host:--port until Ctrl-C."""
    host, port = r.serve
    say = messages(r.lang)
    server = LiveServer(load_run(r.ckpt, r.runs_dir, r.device, r.speed, r.lang), host, port, r.lang)
    if host not in ("127.0.0.1", "localhost", "::1"):
        warn(say("serve.host", host=host, port=server.port), r.lang)
    print(say("serve.open", ckpt=server.inspector.run.ckpt_dir, address=server.address), flush=True)
    try:
        server.serve()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM, after the server stopped gracefully: the normal way to end it
        pass
    print(say("serve.stopped"), flush=True)


def print_score(run, path: str, text: str, lang: str = "en", full=None, ablate=None) -> None:
    """The score of `text`; with the `full` model's score, that of the heads `ablate` off beside it."""
    s, say = score_text(run, text, progress=True), messages(lang)
    print(say("score.title", path=path, ckpt=run.ckpt_dir, chars=s.chars, tokens=s.tokens))
    print(say("score.lines", loss=f"{s.loss:.4f}", ppl=f"{s.perplexity:.4f}", bpc=f"{s.bits_per_char:.4f}",
              cpt=f"{s.chars_per_token:.4f}"))
    if full is not None:
        print(say("score.ablated", heads=", ".join(f"{l}.{h}" for l, h in ablate), full=f"{full.bits_per_char:.4f}",
                  diff=f"{s.bits_per_char - full.bits_per_char:+.4f}"))


def run_prompts(run, prompts, r: Request, look: Look, roles=None) -> None:
    for prompt in prompts:
        # With --attention the cached decoding records its own maps (the explicit path, one row per step).
        recorded = [] if look.out_dir and r.max_new_tokens > 0 and r.sampling.use_cache else None
        ids = (print_generation(run, prompt, r.max_new_tokens, r.num_samples, r.sampling, recorded)
               if r.max_new_tokens > 0 else run.encode_prompt(prompt))
        patched = patch_record(run, prompt, look) if look.patch is not None else None  # before any file is written
        if look.maps:
            inspect_attention(run, ids, look, r.sampling, recorded, roles, patched)
        if patched is not None:
            print_patch(patched, look)
        if look.lens:
            lens = logit_lens(run.model, ids, resolve_query(look.query, len(ids)))
            print(format_lens(lens, labeller(run.tokenizer), look.lang))


def patch_record(run, prompt: str, look: Look) -> dict:
    """--patch: the prompt (clean) patched into look.patch (corrupted) (inspection/patching.py), its tokens named."""
    label = labeller(run.tokenizer)
    clean, corrupt = run.encode_prompt(prompt), run.encode_prompt(look.patch)
    return named_patch(patch(run.model, clean, corrupt, list(look.patch_heads) or None), label, clean, corrupt)


def print_patch(record: dict, look: Look) -> None:
    """--patch's record printed, and with --attention DIR written as patch.json and patch.png."""
    print(format_patch(record, str, record["labels"], look.lang))
    if look.out_dir:
        written = write_files(make_out_dir(look.out_dir), {
            "patch.json": lambda path: write_json(path, record),
            "patch.png": lambda path: save_figure(draw_patch(record, record["labels"], look.lang), path)}, UserError)
        print(messages(look.lang)("wrote", files=", ".join(str(p) for p in written)))


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


def given(args, *options: str) -> list[str]:
    """Those of `options` that the command line set (a flag when on, a count when not 0)."""
    return [option for option in options if getattr(args, option[2:].replace("-", "_")) not in (None, False, 0)]


def check_inspection_options(args) -> None:
    """UserError for inspection options that cannot go together (before any model is loaded)."""
    looks_at_prompt = (args.head is not None or args.explain is not None or args.why is not None or args.patch is not None
                       or args.words or (args.attention is not None and not args.heads))
    if looks_at_prompt and args.prompt is None:
        raise UserError("--attention, --head, --explain, --why, --patch and --words need --prompt TEXT to look at "
                        "(--heads needs none)")
    if args.patch_heads is not None and args.patch is None:
        raise UserError("--patch-heads names heads to patch together from --prompt into --patch TEXT; add --patch")
    if args.heads_text is not None and not args.heads:
        raise UserError("--heads-text is the held-out text of --heads; add --heads")
    if args.query != -1 and args.explain is None and not args.lens and args.why is None:
        raise UserError("--query picks the token of --explain, --why and --lens; add --explain LAYER.HEAD, --why or --lens")
    if args.lens and args.prompt is None:
        raise UserError("--lens reads the model at a token of --prompt TEXT; add --prompt")
    if args.ablate is None and args.ablate_mode != "mean":
        raise UserError("--ablate-mode says how --ablate switches heads off; add --ablate L.H")
    if args.layers is not None and args.attention is None:
        raise UserError("--layers picks the layers that --attention draws; add --attention DIR")
    if (args.host is not None or args.port is not None) and not args.serve:
        raise UserError("--host and --port say where --serve listens; add --serve")
    if args.weights != "fp32":
        others = given(args, "--no-cache", "--attention", "--score", "--heads", "--serve", "--over-training", "--ablate")
        if others:
            raise UserError(f"--weights {args.weights} speeds up the cached decoding of generated text; "
                            f"drop {', '.join(others)} or the --weights option")
    if args.over_training is not None:
        others = given(args, "--ckpt", "--head", "--explain", "--heads", "--score", "--max-new-tokens", "--lens", "--ablate")
        if args.prompt is None or args.attention is None or others:
            raise UserError("--over-training RUN draws the maps of --prompt TEXT at every snapshot of RUN into --attention "
                            f"DIR{'; drop ' + ', '.join(others) if others else ''}")


def main(argv=None) -> int:
    return run_command(lambda: generate(parse_request(argv)))


def generate(r: Request) -> None:
    """What the command line asked for: scores, heads, generated text and inspections, in that order."""
    if r.serve:
        return serve(r)
    if r.over_training is not None:
        return write_over_training(r)
    text = read_text(r.score) if r.score is not None else None
    run = load_run(r.ckpt, r.runs_dir, r.device, r.speed, r.lang)
    look = check_against_model(run.model, r)  # before generating anything
    mean = r.ablate_mode == "mean" and (r.ablate or r.heads)  # the outputs a switched-off head gives instead
    means = ablation_means(run.model, held_out_ids(run, r.heads_text, r.lang)[0]) if mean else None
    full = score_text(run, text, progress=True) if text is not None and r.ablate else None  # before any head is off
    with ablated(run.model, list(r.ablate), means):
        roles = print_heads(run, r.heads_text, look.out_dir, r.lang, means) if r.heads else None
        if text is not None:
            print_score(run, r.score, text, r.lang, full, r.ablate)
        elif r.prompt is not None or not r.heads:  # --heads alone reads no prompts
            run_prompts(run, [r.prompt] if r.prompt is not None else stdin_prompts(), r, look, roles)


def check_against_model(model, r: Request) -> Look:
    """The request's heads and layers checked against the loaded model: its Look with --layers read."""
    config = model.config
    if r.sampling.top_k is not None and r.sampling.top_k >= config.vocab_size and r.max_new_tokens:
        say = messages(r.lang)
        print(say("note", text=say("note.top_k", k=r.sampling.top_k, V=config.vocab_size)), file=sys.stderr)
    for checked in (r.look.head, r.look.explain if r.look.explain != "path" else None):
        if checked is not None:
            check_head(config.n_layer, config.n_head, *checked)
    try:
        check_heads(model, list(r.ablate))
    except UserError as e:
        raise UserError(f"--ablate {r.ablate_text}: {e}") from None
    return replace(r.look, layers=parse_layers(r.layers_text, config.n_layer) if r.layers_text else None)


if __name__ == "__main__":
    sys.exit(main())
