"""Switching heads off (common/heads_off.py), for a look or for good (train.heads_off), the one reader of "L.H", and
what each head is worth (inspection/views/roles.py); and switched-off heads x views: a switched-off head shown off, with
the y W_O received (inspection/trace.py), in the walkthrough, the path, the lens and the maps' titles.

    python -m pytest tests/test_heads_off.py -q
"""

import itertools
import re

import numpy as np
import pytest
import torch

from cli.errors import ModelInputError
from cli.messages import messages
from common.heads_off import HeadsOff, head_means, read_heads
from inspection.html import frame, page, walkthrough_data
from inspection.labels import vector
from inspection.plot import draw_layer
from inspection.views import VIEWS, Settings, compute
from inspection.views.roles import head_importance
from model.sampling import generate
from model.speed import speed_up
from model.speed.fast_gpt import has_hooks
from tests.conftest import CHROMIUM, biased_model, copying_model, toy_run


def ids(seed=0, B=3, T=16):
    return torch.randint(0, 64, (B, T), generator=torch.Generator().manual_seed(seed))


def test_switching_no_head_off_gives_exactly_the_normal_forward():
    model, x = biased_model(), ids()
    with HeadsOff(model, [], "zero"):
        assert not has_hooks(model)
        off = model(x, all_logits=True)[0]
    assert torch.equal(off, model(x, all_logits=True)[0])


def test_zeroing_every_head_of_a_layer_leaves_only_c_proj_s_bias():
    """With every head of layer 0 zeroed, that layer's attention adds c_proj's bias to each token and nothing
    else: the model computes what a hand-written forward without that attention computes."""
    model, x = biased_model(), ids()
    seen = []
    hook = model.blocks[0].attn.register_forward_hook(lambda m, args, out: seen.append(out[0]))
    with HeadsOff(model, [(0, 0), (0, 1)], "zero"):
        logits = model(x, all_logits=True)[0]
    hook.remove()
    bias = model.blocks[0].attn.c_proj.bias
    assert torch.equal(seen[0], bias.expand_as(seen[0]))
    with torch.no_grad():  # by hand: block 0 = x + bias + MLP, block 1 as usual
        h = model.tok_emb(x) + model.pos_emb.weight[:16] + bias
        b0 = model.blocks[0]
        h = h + b0.mlp(b0.ln_2(h))
        h = model.blocks[1](h)[0]
        expected = model.lm_head(model.ln_f(h))
    torch.testing.assert_close(logits, expected, rtol=0, atol=1e-5)


def test_mean_ablation_gives_the_head_its_mean_output_over_the_text():
    model, x = biased_model(), ids(1, B=4)
    means = head_means(model, x, batch=3)  # two chunks
    ys = []  # every head's y, read from the explicit path's probe
    hook = model.blocks[1].attn.probe.register_forward_hook(lambda m, a, kw, out: ys.append(kw["y"]), with_kwargs=True)
    model.forward_with_attention(x)
    hook.remove()
    y = ys[0]  # (B, nh, T, hs)
    torch.testing.assert_close(means[1], y.transpose(1, 2).reshape(-1, 32).mean(0), rtol=0, atol=1e-6)
    outs = []
    with HeadsOff(model, [(1, 1)], "mean", means):  # a hook registered after its own sees what it did
        hook = model.blocks[1].attn.c_proj.register_forward_pre_hook(lambda m, args: outs.append(args[0]))
        model(x)
    hook.remove()
    torch.testing.assert_close(outs[0][..., 16:], means[1, 16:].expand(4, 16, 16))  # head 1: its mean, everywhere
    torch.testing.assert_close(outs[0][..., :16], y[:, 0])  # head 0 untouched


def test_cached_and_uncached_decoding_switch_off_the_same_heads():
    model = speed_up(biased_model(block_size=32))  # its decoding step would skip the hooks: the modules run
    prompt = ids(2, B=2, T=5)
    full = model(prompt)[0]
    with HeadsOff(model, [(1, 0), (0, 1)], "zero"):
        assert (model(prompt)[0] - full).abs().max() > 1e-3  # the heads matter (logits of this model are ~0.1)
        cached = generate(model, prompt, 40, temperature=0)  # past block_size: the cache slides too
        uncached = generate(model, prompt, 40, temperature=0, use_cache=False)
        with pytest.raises(ModelInputError, match="weights bf16 decode without the model's modules"):
            generate(speed_up(model, "bf16"), prompt, 4, temperature=0)
        speed_up(model, "fp32")
    assert torch.equal(cached, uncached)
    assert not has_hooks(model)  # and are back on
    assert torch.equal(model(prompt)[0], full)


def test_heads_are_read_in_every_form_and_checked_with_one_wording():
    config = biased_model().config
    for given in ("1.0,0.1", " 1.0 , 0.1 ", ["1.0", "0.1"], [(1, 0), (0, 1)], [[1, 0], [0, 1]], ((np.int64(1), 0), (0, 1))):
        assert read_heads(given, "off", config) == [(0, 1), (1, 0)], given
    assert read_heads((1, 0), "off", config) == [(1, 0)]  # one pair
    with pytest.raises(ModelInputError, match=r"off: head 9\.9 is not in this model: it has layers 0\.\.1 and heads 0\.\.1"):
        read_heads([(9, 9)], "off", config)
    with pytest.raises(ModelInputError, match=r"head 1\.0 is given twice"):
        read_heads("1.0,0.0,1.0", "off", config)
    for bad in (["1.0", "x"], "1.x", "１.０", "².0", 0, 1.0, (1, 0, 0), [(1, True)], [("1", "0")], [[1, 0], [1]], None):
        with pytest.raises(ModelInputError, match="^off"):  # one line naming the argument, never a traceback
            read_heads(bad, "off", config)
    for bad in ("", " , ", []):
        with pytest.raises(ModelInputError, match="off needs at least one head"):
            read_heads(bad, "off", config)


def test_importance_of_the_hand_built_copying_model():
    """Its previous-token head 0.0 and induction head 1.0 carry the whole in-context loss drop; its zeroed
    heads 0.1 and 1.1 output zeros already, so zero-ablating them changes nothing."""
    text = torch.randint(1, 8, (64,), generator=torch.Generator().manual_seed(1)).numpy()
    imp = head_importance(copying_model(), text, list(range(1, 8)), eot_id=0, mode="zero")
    assert imp.full_drop > 13
    assert imp.drop[0, 0] > 0.8 * imp.full_drop and imp.drop[1, 0] > 0.99 * imp.full_drop
    assert imp.loss[0, 1] == imp.drop[0, 1] == imp.loss[1, 1] == imp.drop[1, 1] == 0


def test_a_kept_off_head_gives_its_batch_mean_while_training_and_the_measured_mean_after():
    """train.heads_off's hook (HeadsOff): in training, head 1.0's dims of every token are that batch's mean of its
    own raw output, with no gradient into its q, k and v; in evaluation they are `means`, which `measure` takes
    over every token of the windows; the other head is untouched either way."""
    model, x = biased_model(), ids()
    c, hs = model.config.n_embd, model.config.head_dim
    kept = HeadsOff(model, [(1, 0)], "mean")
    raw, given = [], []
    proj = model.blocks[1].attn.c_proj
    hooks = [proj.register_forward_pre_hook(lambda m, a: raw.append(a[0].detach().clone()), prepend=True),
             proj.register_forward_pre_hook(lambda m, a: given.append(a[0].detach().clone()))]
    model.train()
    loss = model(x, x)[1]
    batch_mean = raw[0][..., :hs].mean((0, 1))
    torch.testing.assert_close(given[0][..., :hs], batch_mean.expand(*x.shape, hs), rtol=0, atol=1e-6)
    assert torch.equal(given[0][..., hs:], raw[0][..., hs:])
    loss.backward()
    grad = model.blocks[1].attn.c_attn.weight.grad  # rows: W_Q, W_K, W_V of every head, side by side
    for part in range(3):
        assert torch.count_nonzero(grad[part * c : part * c + hs]) == 0  # head 1.0 learns nothing
        assert torch.count_nonzero(grad[part * c + hs : (part + 1) * c]) > 0  # head 1.1 does
    windows = ids(1, 4, 16)
    kept.measure(model, windows)
    raw.clear()
    model.eval()
    with torch.no_grad():
        model(windows)
    torch.testing.assert_close(kept.means[1, :hs], raw[0][..., :hs].mean((0, 1)), rtol=0, atol=1e-6)
    given.clear()
    with torch.no_grad():
        model(x)
    assert torch.equal(given[0][..., :hs], kept.means[1, :hs].expand(*x.shape, hs))
    for hook in hooks:
        hook.remove()
    record = kept.record()
    assert record["heads"] == ["1.0"] and record["mode"] == "mean" and record["means"]["1.0"] == kept.means[1, :hs].tolist()


def test_train_heads_off_names_heads_and_layers_and_refuses_what_cannot_be():
    config = biased_model().config.__class__(vocab_size=64, block_size=16, n_layer=2, n_head=3, n_embd=33)
    assert read_heads("1.1,0", "train.heads_off", config, layers=True) == [(0, 0), (0, 1), (0, 2), (1, 1)]
    assert read_heads(["1.1", "0"], "train.heads_off", config, layers=True) == [(0, 0), (0, 1), (0, 2), (1, 1)]
    for names, message in ((["2"], "layer 2; this model has layers 0..1"), (["1.3"], "head 1.3 is not in this model"),
                           (["1.0", "1.0"], "head 1.0 is given twice"), (["0", "1"], "names every head"),
                           (["x"], 'names "x"'), (["1.a"], 'names "1.a"'), (["１"], 'names "１"')):
        with pytest.raises(ModelInputError, match=re.escape(message)):
            read_heads(names, "train.heads_off", config, layers=True)


# ---- ablations x views: a switched-off head is shown off, with the y W_O received, wherever its numbers appear ----

VIEW_IDS = [0, 5, 17, 3, 42, 17, 9, 63, 1]
OFF = [(0, 1), (1, 0)]  # one head in each layer: layer 1 reads layer 0's replaced output


def off_records(mode, heads=OFF, kept=None):
    """biased_model's records of every view with `heads` off in `mode` (inspection/views/: compute switches them off),
    the model, and what each off head's y became (C,) per layer; `kept`: heads its run keeps off (zeros)."""
    model = biased_model(3)
    run = toy_run(model)
    if kept:
        run.kept_off = HeadsOff(model, kept, "zero")
    records = compute(run, VIEW_IDS, ["maps", "walkthrough", "path", "lens"], Settings(mode=mode, explain=(1, 0)), heads)
    means = run.memo.get(("means", None))  # what compute measured: the heads' mean on the run's held-out text
    fill = torch.zeros(2, 32) if mode == "zero" else means
    if run.kept_off:
        run.kept_off.remove()
    return model, run, records, fill.numpy()


def w_o_of(model, layer):
    return model.blocks[layer].attn.c_proj.weight.detach().numpy().T, model.blocks[layer].attn.c_proj.bias.detach().numpy()


def switched_off_name(layer, head, mode, lang="en"):
    say = messages(lang)
    return f"{layer}.{head} " + say("ablate.off", mode=say("ablate.short_" + mode))


@pytest.mark.parametrize("mode", ["mean", "zero"])
def test_the_trace_records_the_y_w_o_receives_so_the_shares_make_out(mode):
    model, _, records, fill = off_records(mode)
    trace = records["maps"]["trace"]
    assert trace.switched_off() == {head: mode for head in OFF}
    d = trace.d_head
    for layer in range(2):
        w_o, b_o = w_o_of(model, layer)
        out = sum(trace.y[layer, h] @ w_o[h * d : (h + 1) * d] for h in range(2)) + b_o  # (T, C)
        np.testing.assert_allclose(out, trace.out[layer], atol=1e-5)  # the shares plus b_O are the recorded out
        np.testing.assert_allclose(trace.shares()[layer].sum(0) + b_o, trace.out[layer], atol=1e-5)  # said once
    for layer, head in OFF:
        np.testing.assert_allclose(trace.y[layer, head], np.broadcast_to(fill[layer, head * d : (head + 1) * d], (9, d)),
                                   atol=1e-6)  # its mean everywhere, or exactly zeros
        np.testing.assert_allclose(trace.att[layer, head].sum(-1), 1, atol=1e-6)  # its attention is still computed
    if mode == "zero":
        assert not trace.y[0, 1].any() and not trace.y[1, 0].any()


@pytest.mark.parametrize("mode", ["mean", "zero"])
@pytest.mark.parametrize("view", ["walkthrough", "path", "lens", "maps"])
def test_every_view_shows_a_switched_off_head_off_with_its_replacement_s_share(mode, view):
    model, run, records, fill = off_records(mode)
    trace = records["maps"]["trace"]
    d = trace.d_head
    share = {(l, h): float(np.linalg.norm(fill[l, h * d : (h + 1) * d] @ w_o_of(model, l)[0][h * d : (h + 1) * d]))
             for l, h in OFF}  # the replacement times W_O: the same at every token
    if mode == "zero":
        assert set(share.values()) == {0.0}  # by hand: zeros times W_O are zeros
    if view == "walkthrough":
        for (layer, head), lang in itertools.product(OFF, ("en", "ko")):
            say = messages(lang)
            found = compute(run, VIEW_IDS, ["walkthrough"], Settings(mode=mode, explain=(layer, head)), OFF)
            text = VIEWS["walkthrough"].text(found["walkthrough"], lang)
            assert say("explain.off", layer=layer, head=head, mode=say("ablate." + mode)) in text
            assert f"|share| = {share[layer, head]:.4f}" in text
            assert say("explain.step7_off", y=vector(fill[layer, head * d : (head + 1) * d]), norm=
                       f"{np.linalg.norm(fill[layer, head * d : (head + 1) * d]):.4f}") in text
            assert text.endswith(say("explain.off_hint")) and say("path.hint") not in text  # not "switch it off"
            assert f"{head}: {share[layer, head]:.4f}{say('explain.off_mark')}" in text
    elif view == "path":
        path = records["path"]
        assert path["blocks"]["off"] == [["", mode], [mode, ""]]
        for (layer, head), token in itertools.product(OFF, range(len(VIEW_IDS))):
            assert path["blocks"]["share"][layer][head][token] == pytest.approx(share[layer, head], abs=1e-6)
        for lang in ("en", "ko"):
            text = VIEWS["path"].text(path, lang)
            say = messages(lang)
            for layer, head in OFF:
                assert say("path.off_note", heads=switched_off_name(layer, head, mode, lang)) in text
                row = next(line for line in text.splitlines() if line.strip().startswith(f"{layer}.{head} "))
                assert row.endswith(say("ablate.off", mode=say("ablate.short_" + mode)))
    elif view == "lens":
        names = ", ".join(switched_off_name(l, h, mode) for l, h in OFF)
        assert messages("en")("lens.off", heads=names) in VIEWS["lens"].text(records["lens"], "en")
        assert records["lens"]["off"] == [[l, h, mode] for l, h in OFF]
    else:  # the maps: the PNG's titles, the page's frame and walkthrough data
        assert frame(records, [0, 1])["off"] == [["", mode], [mode, ""]]
        assert walkthrough_data(records["walkthrough"], [1])["off"] == [[mode, ""]]
        figure = draw_layer(trace.att, [f"t{j}" for j in VIEW_IDS], 0, off=trace.off)
        titles = [ax.get_title() for ax in figure.axes if ax.get_title()]
        assert titles == ["layer 0 head 0", "layer 0 head 1 · off (" + mode + ")"]
        assert messages("en")("ablate.map_note") in figure._suptitle.get_text()


def test_with_no_head_off_the_views_are_as_before():
    """Nothing off: y is the probe's att @ v, and no view names a head off."""
    model = biased_model(3)
    records = compute(toy_run(model), VIEW_IDS, ["maps", "walkthrough", "path", "lens"], Settings(explain=(1, 0)))
    trace = records["maps"]["trace"]
    ys = []
    hook = model.blocks[1].attn.probe.register_forward_hook(lambda m, a, kw, out: ys.append(kw["y"]), with_kwargs=True)
    model.forward_with_attention(torch.tensor([VIEW_IDS]))
    hook.remove()
    np.testing.assert_allclose(trace.y[1], ys[0][0].detach().numpy(), atol=1e-6)
    assert trace.switched_off() == {} and not has_hooks(model)
    text = VIEWS["walkthrough"].text(records["walkthrough"], "en")
    assert "7. y = Σ_j w_j v_j = " in text and text.endswith(messages("en")("path.hint"))
    assert "switched off" not in text and "(off)" not in text
    path, path_text = records["path"], VIEWS["path"].text(records["path"], "en")
    assert path["blocks"]["off"] == [["", ""], ["", ""]] and "off (mean)" not in path_text
    assert "switched off:" not in path_text and "off (zero)" not in path_text
    assert records["lens"]["off"] == [] and "switched off" not in VIEWS["lens"].text(records["lens"], "en")
    assert frame(records, [0, 1])["off"] == [["", ""], ["", ""]]
    figure = draw_layer(trace.att, [f"t{j}" for j in VIEW_IDS], 1, off=trace.off)
    assert [ax.get_title() for ax in figure.axes if ax.get_title()] == ["layer 1 head 0", "layer 1 head 1"]


def test_a_head_kept_off_by_the_run_is_shown_off_and_one_switched_off_on_top_counts():
    model, run, records, fill = off_records("mean", [(0, 0), (1, 1)], kept=[(1, 1)])
    trace = records["maps"]["trace"]  # the view's hook runs last: its mean replaces the kept zeros
    assert trace.switched_off() == {(0, 0): "mean", (1, 1): "mean"}
    np.testing.assert_allclose(trace.y[1, 1, 0], fill[1, 16:], atol=1e-6)
    run.kept_off = HeadsOff(model, [(1, 1)], "zero")
    kept = compute(run, VIEW_IDS, ["maps"])["maps"]["trace"]
    assert kept.switched_off() == {(1, 1): "zero"} and not kept.y[1, 1].any()
    run.kept_off.remove()


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
@pytest.mark.parametrize("mode", ["mean", "zero"])
def test_the_page_shows_a_switched_off_head_off_in_its_walkthrough_path_maps_and_lens(mode, tmp_path, browser):
    model, run, records, fill = off_records(mode)
    path = records["path"]
    (tmp_path / "attention.html").write_text(page(records), encoding="utf-8")
    page_ = browser(tmp_path / "attention.html", "#layer=1&head=0&focus=8&explain=1")
    say, d = messages("en"), records["maps"]["trace"].d_head
    walkthrough = page_.evaluate("document.getElementById('explain').textContent")
    assert say("explain.off", layer=1, head=0, mode=say("ablate." + mode)) in walkthrough
    assert say("explain.step7_off", y=vector(fill[1, :d]), norm=f"{np.linalg.norm(fill[1, :d]):.4f}") in walkthrough
    assert walkthrough.endswith(say("explain.off_hint")) and say("path.hint") not in walkthrough
    assert f"0: {path['blocks']['share'][1][0][8]:.4f} (off)" in walkthrough
    assert "layer 1 head 0 · off (" + mode + ")" in page_.texts("#maps figcaption")[0]
    rows = page_.texts("table.path-heads tr")
    assert [r.endswith("off (" + mode + ")") for r in rows if r.strip()[:3] in ("0.0", "0.1", "1.0", "1.1")] == \
        [False, True, True, False]
    assert say("path.off_note", heads=switched_off_name(1, 0, mode)) in page_.evaluate("document.getElementById('path').textContent")
    assert "0.1 off (" + mode + "), 1.0 off (" + mode + ")" in page_.evaluate("document.getElementById('lens').textContent")
    assert page_.problems() == ([], "")


CLEAN, CORRUPT = [0, 3, 5, 2, 6, 1, 3], [0, 3, 4, 2, 6, 1, 3]  # tests/test_patch.py's pair on the copying model


def switched_off_by(how: str, mode: str):
    """The copying model's records of why and patch with head 0.1 off (its weights are zeros, so the copying goes on): by `compute`'s off= (--ablate, the notebook's
    off=, the live switch) or kept off by the run (train.heads_off); the run's kept HeadsOff, to remove after."""
    model = copying_model()
    run = toy_run(model)
    kept = HeadsOff(model, [(0, 1)], mode) if how == "kept" else None
    run.kept_off = kept
    settings = Settings(mode=mode, corrupt=" ".join(f"t{i}" for i in CORRUPT), patch_heads=[(1, 0), (0, 1)])
    records = compute(run, CLEAN, ["why", "patch"], settings, "0.1" if how == "off" else None)
    return records, kept


@pytest.mark.parametrize("how", ["off", "kept"])
@pytest.mark.parametrize("mode", ["mean", "zero"])
@pytest.mark.parametrize("lang", ["en", "ko"])
def test_why_and_patch_mark_a_switched_off_head_however_it_was_switched_off(how, mode, lang):
    """--why and --patch (terminal, notebook, page: the same records) name head 0.1 off, in its rows and a note, and
    the records say so (why.json and patch.json hold them): 2 ways x 2 modes x 2 languages."""
    say = messages(lang)
    records, kept = switched_off_by(how, mode)
    try:
        mark = " " + say("ablate.off", mode=say("ablate.short_" + mode))
        why, patch = records["why"], records["patch"]
        assert why["off"] == [[0, 1, mode]] and patch["off"] == {"0.1": mode}
        text = VIEWS["why"].text(why, lang, rows=20)
        row = next(line for line in text.splitlines() if "head 0.1" in line)
        assert "head 0.1" + mark in row and say("why.off", heads="0.1" + mark) in text
        assert not any("head 1.0" + mark in line for line in text.splitlines())  # the heads on are not
        text = VIEWS["patch"].text(patch, lang)
        assert say("patch.off", heads="0.1" + mark) in text
        assert say("patch.together", heads="0.1" + mark + ", 1.0", share=f"{patch['together']:.2f}") in text
        assert abs(patch["heads"]["0.1"]) < 1e-6  # it recovers nothing: both runs give it the same replacement
    finally:
        if kept is not None:
            kept.remove()
