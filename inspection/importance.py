"""Which heads matter: each head switched off alone (model/ablation.py), and what the model loses without it.

    means = ablation_means(model, text_ids)                        # each head's mean output on held-out text
    imp = head_importance(model, text_ids, vocab_ids, eot_id, means)
    imp.loss[l, h]    # nats per token the held-out text costs more with head l.h off
    imp.drop[l, h]    # nats of the in-context loss drop (the induction test) lost with it off

A role score says where a head looks; these say what the model needs it for. The held-out loss is the mean
next-token loss over the same windows the role scores read; the in-context loss drop is the induction test's
(inspection/heads.py: the loss on a repeated random text's first copy minus its second). `means` None
switches heads off to zeros instead of their mean output (`--ablate-mode zero`).
"""

import numpy as np
import torch
import torch.nn.functional as F

from inspection.heads import WINDOW, Importance, copy_losses, induction_sequences, windows_of
from model.ablation import ablated, head_means

MODES = ("mean", "zero")


def held_out_windows(model, text_ids) -> torch.Tensor:
    """The role scores' windows of held-out text (inspection.heads.windows_of), on the model's device."""
    return windows_of(text_ids, min(WINDOW, model.config.block_size)).to(model.tok_emb.weight.device)


def ablation_means(model, text_ids) -> torch.Tensor:
    """Each layer's head outputs averaged over the held-out windows: the `means` of `model.ablation.ablated`."""
    return head_means(model, held_out_windows(model, text_ids))


@torch.inference_mode()
def losses(model, windows, seqs, n: int, o: int) -> tuple[float, float]:
    """(held-out loss of windows, in-context loss drop of seqs) of the model as it runs now."""
    logits = model(windows[:, :-1], all_logits=True)[0]  # (N, T - 1, V)
    held_out = F.cross_entropy(logits.flatten(0, 1).float(), windows[:, 1:].flatten()).item()
    first, second = copy_losses(model(seqs, all_logits=True)[0], seqs, n, o)
    return held_out, first - second


def head_importance(model, text_ids, vocab_ids, eot_id, means: torch.Tensor | None) -> Importance:
    """Every head's `Importance`, one head off at a time (the module docstring)."""
    windows = held_out_windows(model, text_ids)
    seqs, n, o = induction_sequences(model, vocab_ids, eot_id)
    full_loss, full_drop = losses(model, windows, seqs, n, o)
    L, H = model.config.n_layer, model.config.n_head
    loss, drop = np.zeros((L, H)), np.zeros((L, H))
    for layer in range(L):
        for head in range(H):
            with ablated(model, [(layer, head)], means):
                held_out, in_context = losses(model, windows, seqs, n, o)
            loss[layer, head], drop[layer, head] = held_out - full_loss, full_drop - in_context
    return Importance("zero" if means is None else "mean", loss, drop, full_loss, full_drop)
