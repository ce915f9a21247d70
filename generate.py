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
(defined in inspection/views/maps.py). --explain walks through one head at one query token with the model's
own numbers; --heads scores every head's role; --over-training draws the text at every snapshot of a run
(train.snapshots) on one page with a slider (inspection/over_training.py). Each inspection is a view of
inspection/views/, whose records this command asks `inspection.views.compute` for and prints as text: the
notebook (inspection/notebook.py) and the live page show the same records.
"""

if __name__ == "__main__":  # Ctrl-C while torch loads ends with one line, not a traceback
    from cli import stop_quietly_while_loading

    stop_quietly_while_loading()

import sys
from dataclasses import dataclass, field
from pathlib import Path

from cli.command import ArgumentParser, integer, run_command
from cli.errors import UserError
from cli.messages import LANGUAGES, locale_language, messages, use_language
from common.heads_off import MODES, HeadsOff, check_heads, read_head, read_heads
from inference.runs import check_text, load_run, warn
from inference.scoring import read_text
from inference.textgen import check_batch, stream_text
from inspection.files import make_out_dir, write_records
from inspection.heldout import held_out_means
from inspection.live_server import LiveServer
from inspection.over_training import format_snapshot_table, over_training_page, run_snapshots
from inspection.views import VIEWS, Settings, compute
from inspection.views.roles import stored_roles
from inspection.watch_server import serve_runs
from model.config import MAX_SIZES
from model.sampling import TEMPERATURE, Sampling
from model.speed.decode_weights import FORMATS
from storage.atomic import write_files, write_text_atomic
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
                   "e.g. 1.0,1.2 (common/heads_off.py)")
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
    p.add_argument("--lang", choices=LANGUAGES, help="language of every line printed (warnings too), the PNGs and the page: "
                   "ko or en (default: the locale's, ko where LANG or LC_ALL begins with ko)")
    p.add_argument("--serve", action="store_true", help="the live inspector: a local page where the maps, the "
                   "walkthrough and the next token follow a text as it is typed (Ctrl-C stops it)")
    p.add_argument("--watch", nargs="+", metavar="RUN", help="the live training page of a run directory (finished, "
                   "or being trained now), or of two side by side on one step axis: RUN RUN2 (Ctrl-C stops it)")
    p.add_argument("--host", help="address --serve and --watch listen on (default 127.0.0.1, this machine only)")
    p.add_argument("--port", type=integer, help="port of --serve and --watch (default 8000; 0: any free one)")
    p.add_argument("--over-training", metavar="RUN", help="with --prompt and --attention DIR: one page with a slider over "
                   "the snapshots of RUN (train.snapshots), DIR/over_training.html")
    return p.parse_args(argv)


def parse_why(text: str | None) -> tuple[str | None, str | None] | None:
    """--why "A,B" -> (A, B); "A" -> (A, None); "" -> (None, None): the model's choice and its runner-up."""
    if text is None:
        return None
    first, comma, second = text.partition(",")
    if comma and not second.strip() or not first.strip() and second.strip():
        raise UserError(f"--why {text!r} must name one token or two, as A or A,B (or nothing: the model's choice); "
                        "name a comma token by its id, #ID (the id the attention tables print)")
    return first.strip() or None, second.strip() or None


def parse_layers(text: str) -> tuple[int, ...]:
    """"0,2-3" -> (0, 2, 3); a UserError for anything else (the model checks that it has them)."""
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
        if high >= MAX_SIZES["n_layer"]:  # before a range is built: "0-99999999999" is no set to make
            raise UserError(f"--layers {text!r} names a layer this model lacks; no model has more than "
                            f"{MAX_SIZES['n_layer']} layers")
        layers.update(range(low, high + 1))
    return tuple(sorted(layers))


@dataclass(frozen=True)
class Request:
    """generate.py's command line, parsed and checked once: the run, the decoding, and the views asked for (`views`,
    of inspection/views/, with their `settings`) with the heads `off` switched off for everything."""
    lang: str
    prompt: str | None = None
    ckpt: str | None = None
    runs_dir: str = "runs"
    device: str = "auto"
    speed: bool = True  # the speed layer (model/speed/); --no-speed-up: the textbook network alone
    weights: str = "fp32"  # --weights: the speed layer's decoding step's matrices
    max_new_tokens: int = 200
    num_samples: int = 1
    sampling: Sampling = field(default_factory=lambda: Sampling(TEMPERATURE))
    score: str | None = None
    out_dir: str | None = None  # --attention DIR
    shown: tuple[str, ...] = ()  # the views each prompt prints (--attention DIR: the page's are computed and written too)
    settings: Settings = field(default_factory=Settings)
    off: tuple[tuple[int, int], ...] = ()  # --ablate
    heads: bool = False
    serve: tuple[str, int] | None = None  # (host, port) of --serve, or of --watch
    watch: tuple[str, ...] = ()  # --watch's run directories
    over_training: str | None = None


def parse_request(argv) -> Request:
    """The command line as a Request; a UserError for an option out of range or options that cannot go together,
    in the order a user meets them, before any model is loaded."""
    args = parse_args(argv)
    lang = args.lang or locale_language()
    if args.serve:  # before any default is filled in: what --serve does not use is refused as given
        return Request(lang, ckpt=args.ckpt, runs_dir=args.runs_dir, device=args.device, speed=not args.no_speed_up,
                       serve=serve_address(args))
    if args.watch:
        if len(args.watch) > 2:
            raise UserError(f"--watch shows one run or two side by side, not {len(args.watch)}; pass RUN or RUN RUN2")
        return Request(lang, serve=serve_address(args, "--watch", WATCH_USES), watch=tuple(args.watch))
    inspecting = (args.attention is not None or args.head is not None or args.explain is not None or args.heads
                  or args.lens or args.why is not None or args.patch is not None or args.words)
    max_new_tokens = (0 if inspecting else 200) if args.max_new_tokens is None else args.max_new_tokens
    sampling = Sampling(args.temperature, args.top_k, args.top_p, args.repetition_penalty, args.seed,
                        use_cache=not args.no_cache)
    if args.no_speed_up and args.weights != "fp32":
        raise UserError(f"--weights {args.weights} is a speed variant of decoding; drop it or --no-speed-up")
    check_batch(max_new_tokens, args.num_samples)
    check_inspection_options(args)
    if args.score is not None and (args.prompt is not None or inspecting) and args.over_training is None:
        raise UserError("--score scores a file; use it without --prompt, --attention, --head, --explain and --heads")
    path = " or path (one token's whole way to the next token)"
    explain = read_head(args.explain, "--explain", hint=path) if args.explain not in (None, "path") else None
    settings = Settings(query=args.query, explain=explain, sampling=sampling,
                        head=read_head(args.head, "--head") if args.head is not None else None,
                        why=parse_why(args.why) or (None, None), corrupt=args.patch,
                        patch_heads=tuple(read_heads(args.patch_heads, "--patch-heads")) if args.patch_heads else (),
                        layers=parse_layers(args.layers) if args.layers else None, heads_text=args.heads_text,
                        mode=args.ablate_mode)
    off = tuple(read_heads(args.ablate, "--ablate")) if args.ablate is not None else ()
    return Request(lang, args.prompt, args.ckpt, args.runs_dir, args.device, not args.no_speed_up, args.weights,
                   max_new_tokens, args.num_samples, sampling, args.score, args.attention, views_shown(args), settings,
                   off, args.heads, over_training=args.over_training)


PAGE_VIEWS = ("maps", "words", "walkthrough", "path", "why", "lens")  # what the page of --attention DIR shows


def views_shown(args) -> tuple[str, ...]:
    """The views whose text each prompt prints, in that order: the maps' statistics with --attention, --head and
    --explain, the words with --words, and each other view with its own option."""
    asked = [("maps", args.attention is not None or args.head is not None or args.explain is not None),
             ("walkthrough", args.explain not in (None, "path")), ("path", args.explain == "path"), ("words", args.words),
             ("why", args.why is not None), ("patch", args.patch is not None), ("lens", args.lens)]
    return tuple(name for name, wanted in asked if wanted)


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
        print(messages()("sample.head", k=k + 1, n=n) + f"\n{prompt}{text}")
    # The first sample's tokens up to its end-of-text (other rows may have run on).
    return ids + (new[: new.index(run.eot_id) + 1] if run.eot_id in new else new)


def run_prompts(run, prompts, r: Request, roles: dict | None) -> None:
    """Each prompt: its continuation (with heads off as asked), then the views asked of the whole text, printed and,
    with --attention DIR, written (`roles`: --heads' record, on the page too)."""
    views = tuple(PAGE_VIEWS if r.out_dir else ()) + tuple(v for v in r.shown if v not in PAGE_VIEWS or not r.out_dir)
    # the page's roles: --heads', else the ones training measured of these weights (with every head on), read once
    stored = None if roles or r.off or not r.out_dir else stored_roles(run)
    found = {"roles": roles} if roles else {"roles": stored, "roles_stored": True} if stored else {}
    say = messages(r.lang)
    for prompt in prompts:
        # With --attention the cached decoding records its own maps (the explicit path, one row per step).
        recorded = [] if r.out_dir and r.max_new_tokens > 0 and r.sampling.use_cache else None
        if r.max_new_tokens > 0:
            with switched_off(run, r):
                ids = print_generation(run, prompt, r.max_new_tokens, r.num_samples, r.sampling, recorded)
        else:
            ids = run.encode_prompt(prompt)
        if not views:
            continue
        records = compute(run, ids, views, r.settings, r.off or None, recorded)
        if r.out_dir:
            written = write_records(records | found, r.out_dir, r.lang,
                                    list(r.settings.layers) if r.settings.layers is not None else None, r.shown)
            print(say("wrote", files=", ".join(str(p) for p in written)))
        for name in r.shown:
            print(VIEWS[name].text(records[name], r.lang))


def switched_off(run, r: Request) -> HeadsOff:
    """The heads of --ablate switched off, for what runs outside the views (a generation), as `compute` does."""
    means = held_out_means(run, r.settings.heads_text) if r.off and r.settings.mode == "mean" else None
    return HeadsOff(run.model, list(r.off), r.settings.mode, means)


def write_over_training(r: Request) -> None:
    """--over-training RUN: the prompt's maps at every snapshot of RUN on one page, and each one's strongest heads."""
    snapshots = run_snapshots(Path(r.over_training))
    n_layer = read_config(snapshots[0]).n_layer
    layers = list(r.settings.layers) if r.settings.layers is not None else list(range(n_layer))
    if max(layers) >= n_layer:
        raise UserError(f"--layers names a layer this model lacks; it has layers 0..{n_layer - 1}")
    page, frames, labels = over_training_page(snapshots, r.over_training, r.prompt, r.device, layers, r.lang)
    say = messages(r.lang)
    written = write_files(make_out_dir(r.out_dir), {"over_training.html": lambda path: write_text_atomic(path, page)},
                          UserError)  # fmt: skip
    print(say("snapshots.title", path=written[0], n=len(frames), T=len(labels)))
    print(format_snapshot_table(frames, layers, r.lang))


SERVE_USES = {"ckpt", "runs_dir", "device", "no_speed_up", "serve", "host", "port", "lang"}  # the options --serve reads
WATCH_USES = {"watch", "host", "port", "lang"}  # and --watch


def serve_address(args, option: str = "--serve", uses: set = SERVE_USES) -> tuple[str, int]:
    """--serve's (or --watch's) (host, port); a UserError for a port out of range or any option it does not read."""
    if args.port is not None and not 0 <= args.port <= 65535:
        raise UserError(f"--port {args.port} must be between 0 and 65535")
    untouched = vars(parse_args([]))  # what the page sets: every other option given is refused, not ignored
    others = [f"--{k.replace('_', '-')}" for k, v in vars(args).items() if k not in uses and v != untouched[k]]
    if others and option == "--watch":
        raise UserError(f"--watch shows what the runs wrote and computes the maps of the text the page names; drop "
                        f"{', '.join(others)}")
    if others:
        raise UserError(f"--serve takes its texts, sampling settings and switched-off heads from the page; drop "
                        f"{', '.join(others)}")
    return args.host or "127.0.0.1", 8000 if args.port is None else args.port


def serve(r: Request) -> None:
    """--serve: the live inspector on --host:--port until Ctrl-C."""
    host, port = r.serve
    say = messages(r.lang)
    server = LiveServer(load_run(r.ckpt, r.runs_dir, r.device, r.speed), host, port, r.lang)
    if host not in ("127.0.0.1", "localhost", "::1"):
        warn(say("serve.host", host=host, port=server.port))
    print(say("serve.open", ckpt=server.inspector.run.ckpt_dir, address=server.address), flush=True)
    try:
        server.serve()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM, after the server stopped gracefully: the normal way to end it
        pass
    print(say("serve.stopped"), flush=True)


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
    if args.words and args.head is None and args.explain in (None, "path") and args.attention is None:
        raise UserError("--words reads attention by word (어절) in what another option shows; add --head L.H, "
                        "--explain L.H or --attention DIR")
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
        raise UserError("--host and --port say where --serve listens; add --serve (or --watch RUN)")
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
    use_language(r.lang)  # every line below, warnings included, is said in it
    if r.watch:
        return serve_runs([Path(run) for run in r.watch], *r.serve, r.lang)
    if r.serve:
        return serve(r)
    if r.over_training is not None:
        return write_over_training(r)
    text = read_text(r.score) if r.score is not None else None
    run = load_run(r.ckpt, r.runs_dir, r.device, r.speed, r.weights)
    check_against_model(run.model, r)  # before generating anything
    roles = None
    if r.heads:
        roles = compute(run, None, ["roles"], r.settings, r.off or None)["roles"]
        print(VIEWS["roles"].text(roles, r.lang))
        if r.out_dir and r.prompt is None:
            written = write_records({"roles": roles}, r.out_dir, r.lang)
            print(messages(r.lang)("wrote", files=", ".join(str(p) for p in written)))
    if text is not None:
        score = compute(run, text, ["score"], r.settings, r.off or None)["score"]
        say = messages(r.lang)
        print(say("score.title", path=r.score, ckpt=run.ckpt_dir, chars=score["chars"], tokens=score["tokens"]))
        print(VIEWS["score"].text(score, r.lang))
    elif r.prompt is not None or not r.heads:  # --heads alone reads no prompts
        run_prompts(run, [r.prompt] if r.prompt is not None else stdin_prompts(), r, roles)


def check_against_model(model, r: Request) -> None:
    """The request's heads and layers checked against the loaded model, each named by its option."""
    config = model.config
    if r.sampling.top_k is not None and r.sampling.top_k >= config.vocab_size and r.max_new_tokens:
        say = messages(r.lang)
        print(say("note", text=say("note.top_k", k=r.sampling.top_k, V=config.vocab_size)), file=sys.stderr)
    for option, heads in (("--head", [r.settings.head]), ("--explain", [r.settings.explain]), ("--ablate", r.off),
                          ("--patch-heads", r.settings.patch_heads)):
        check_heads(config, [h for h in heads if h is not None], option)
    if r.settings.layers is not None and max(r.settings.layers) >= config.n_layer:
        raise UserError(f"--layers names a layer this model lacks; it has layers 0..{config.n_layer - 1}")


if __name__ == "__main__":
    sys.exit(main())
