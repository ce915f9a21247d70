"""The pictures of a run, drawn from its metrics.jsonl when it ends: loss.png and heads.png, in the run's language.

    records = read_metrics(run_dir / "metrics.jsonl")      # training/metrics.py
    plot_losses(records, run_dir / "loss.png", lang="ko")  # train and validation loss against the step
    plot_heads(records, run_dir / "heads.png", lang="ko")  # the loss, then every head's role scores below it

heads.png shares one step axis between the loss curves (top), one panel per role of inspection/views/roles.py
(every head a line, coloured by layer, with chance dashed and the bar a role must pass dotted) and the
in-context loss drop on repeated random tokens (bottom), so the evaluation at which a head forms, and the
change in the loss that often comes with an induction head, line up. A head is marked where its score first
passes the bar (at least `ROLE_MIN` and twice chance), and each panel lists those heads ("layer.head at step").
Where evaluations measured what switching each head off costs (train.head_costs), two panels more: the held-out
loss it adds and the in-context loss drop it takes away, so the step a head becomes needed lines up with the step
its role score rises. Heads the run keeps off (train.heads_off: the records' "off") have no line, and the first
role panel names them.
its role score rises. Every label, title and legend is a text of cli/messages.py, drawn in the Korean font the
attention PNGs use (inspection/plot.py).
"""

from math import nan
from pathlib import Path

from cli.messages import messages
from inspection.views.roles import NECESSARY, ROLES, first_reached, role_bar
from inspection.plot import FONT_FAMILIES, font_paths
from storage.atomic import atomic_write


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def fonts():
    """The settings that draw Hangul in NanumGothic (inspection/plot.py registers it), DejaVu Sans for the rest."""
    font_paths()
    return {"font.family": FONT_FAMILIES, "axes.unicode_minus": False}


def save_png(fig, png: Path) -> None:
    """Write `fig` to `png` atomically, and free it."""
    try:
        with pyplot().rc_context(fonts()):
            atomic_write(png, lambda tmp: fig.savefig(tmp, format="png", dpi=100))
    finally:
        pyplot().close(fig)


def draw_losses(ax, records: list[dict], say) -> None:
    """Train loss per logged step, and the evaluations' train and validation losses."""
    steps = [r for r in records if "loss" in r]
    evals = [r for r in records if r.get("kind") == "eval"]
    ax.plot([r["step"] for r in steps], [r["loss"] for r in steps], lw=0.8, alpha=0.6, label=say("plots.logged"))
    ax.plot([r["step"] for r in evals], [r["train_loss"] for r in evals], "o-", ms=3, label=say("plots.train"))
    ax.plot([r["step"] for r in evals], [r["val_loss"] for r in evals], "o-", ms=3, label=say("plots.val"))
    ax.set_ylabel(say("plots.loss"))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def plot_losses(records: list[dict], png: Path, lang: str | None = None) -> None:
    """loss.png: the losses against the step, in `lang`."""
    say = messages(lang)
    with pyplot().rc_context(fonts()):
        fig, ax = pyplot().subplots(figsize=(7, 4))
        draw_losses(ax, records, say)
        ax.set_xlabel(say("plots.step"))
        fig.tight_layout()
        save_png(fig, png)


def marked(found: list[tuple[int, str]], say) -> str:
    """ "0.2 at 1,800, 1.0 at 2,000, ..." (at most six) of (step, "layer.head") pairs, in order of the step."""
    names = [say("plots.at", head=name, step=f"{step:,}") for step, name in sorted(found)]
    return ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")


def head_lines(ax, records: list[dict], table, bar: float | None, n_layer: int, n_head: int, colours, say) -> list:
    """A line per head over the evaluations `records` of `table(record["heads"])[layer][head]` (null: no point),
    coloured by layer, each head marked where it first reaches `bar` (None: none); [(step, "layer.head")] of those."""
    steps, reached = [r["step"] for r in records], []
    for layer in range(n_layer):
        for head in range(n_head):
            ys = [nan if (y := table(r["heads"])[layer][head]) is None else y for r in records]
            ax.plot(steps, ys, lw=1, color=colours[layer], label=say("page.layer_n", n=layer) if head == 0 else None)
            step = None if bar is None else first_reached(steps, ys, bar)
            if step is not None:
                ax.plot(step, bar, "v", color=colours[layer], ms=6)
                reached.append((step, f"{layer}.{head}"))
    return reached


def draw_costs(axes, costed: list[dict], n_layer: int, n_head: int, colours, say) -> None:
    """Two panels: what switching each head off alone costs at each evaluation that measured it, the held-out loss
    it adds and the in-context loss drop it takes away, a line per head; each head marked where its drop lost
    first reaches NECESSARY."""
    necessary = []
    for ax, key in zip(axes, ("loss", "drop")):
        found = head_lines(ax, costed, lambda heads: heads["importance"][key], NECESSARY if key == "drop" else None,
                           n_layer, n_head, colours, say)
        necessary += found
        ax.axhline(0, lw=0.8, color="grey")
        ax.set_ylabel(say("plots.cost_" + key), fontsize=9)
        ax.grid(alpha=0.3)
    if necessary:
        axes[1].axhline(NECESSARY, ls=":", lw=0.8, color="black")
        axes[1].text(0.99, 0.95, say("plots.needed", bar=f"{NECESSARY:g}", heads=marked(necessary, say)),
                     transform=axes[1].transAxes, ha="right", va="top", fontsize=8,
                     bbox={"boxstyle": "round", "fc": "white", "ec": "0.8"})


def plot_heads(records: list[dict], png: Path, lang: str | None = None) -> bool:
    """heads.png as the module docstring describes it, in `lang`; False (and no file) when no evaluation scored
    heads."""
    with pyplot().rc_context(fonts()):
        return draw_heads(records, png, messages(lang))


def draw_heads(records: list[dict], png: Path, say) -> bool:
    """heads.png, its texts from `say` (messages(lang)); False when no evaluation scored heads."""
    scored = [r for r in records if r.get("kind") == "eval" and r.get("heads")]
    if not scored:
        return False
    plt = pyplot()
    steps = [r["step"] for r in scored]
    first = scored[0]["heads"]
    n_layer, n_head = len(first["scores"][ROLES[0]]), len(first["scores"][ROLES[0]][0])
    colours = plt.get_cmap("viridis")([0.85 * layer / max(1, n_layer - 1) for layer in range(n_layer)])
    costed = [r for r in scored if r["heads"].get("importance")]  # train.head_costs: what each head off costs
    panels = len(ROLES) + 2 + (2 if costed else 0)
    fig, axes = plt.subplots(panels, 1, figsize=(8, 2.2 * panels), sharex=True)
    draw_losses(axes[0], records, say)
    spent = sum(r["heads"].get("seconds", 0.0) for r in scored)
    wall = next((r["wall_s"] for r in reversed(records) if r.get("kind") == "final"), None)
    share = say("plots.of_run", share=f"{spent / wall:.1%}") if wall else ""
    axes[0].set_title(say("plots.heads_title", n=len(scored), seconds=f"{spent:.1f}", share=share), fontsize=10)
    for ax, role in zip(axes[1:], ROLES):
        chance = first["chance"][role] or 0.0
        bar = role_bar(chance)
        formed = head_lines(ax, scored, lambda heads: heads["scores"][role], bar, n_layer, n_head, colours, say)
        if formed:
            ax.text(0.99, 0.95, say("plots.passed", heads=marked(formed, say)), transform=ax.transAxes, ha="right",
                    va="top", fontsize=8, bbox={"boxstyle": "round", "fc": "white", "ec": "0.8"})
        ax.axhline(chance, ls="--", lw=0.8, color="grey")
        ax.axhline(bar, ls=":", lw=0.8, color="black")
        ax.set_ylim(0, 1)
        ax.set_ylabel(say("role." + role), fontsize=9)
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=8, ncol=min(n_layer, 6), loc="upper left")
    off = sorted({name for r in scored for name in r["heads"].get("off", [])})  # train.heads_off: no role, no cost
    if off:
        axes[1].text(0.01, 0.05, say("plots.kept_off", heads=", ".join(off)), transform=axes[1].transAxes, ha="left",
                     va="bottom", fontsize=8, color="0.35", bbox={"boxstyle": "round", "fc": "white", "ec": "0.8"})
    drop_axis = axes[len(ROLES) + 1]
    drop = [(r["heads"]["loss_first_copy"] or nan) - (r["heads"]["loss_second_copy"] or nan) for r in scored]
    drop_axis.plot(steps, drop, "o-", ms=3, color="C3")
    drop_axis.axhline(0, lw=0.8, color="grey")
    drop_axis.set_ylabel(say("plots.drop"), fontsize=9)
    drop_axis.grid(alpha=0.3)
    if costed:
        draw_costs(axes[-2:], costed, n_layer, n_head, colours, say)
    axes[-1].set_xlabel(say("plots.step"))
    fig.tight_layout()
    save_png(fig, png)
    return True
