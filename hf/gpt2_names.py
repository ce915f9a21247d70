"""GPT-2's Hugging Face layout, written once and used both ways by hf/export_gpt2.py and hf/import_gpt2.py.

    gpt2 = to_gpt2(model.state_dict(), n_layer)       # our names -> transformers' names and layouts
    state = from_gpt2(gpt2, n_layer)                   # and back: to_gpt2 and from_gpt2 are inverses

Our network is GPT-2's (learned positions, pre-LN blocks, fused Q·K·V, tied head), so the two layouts
differ only in names and in one transpose: GPT-2 keeps its projections as `Conv1D` with weight
(in, out), where `nn.Linear` keeps (out, in). `WEIGHTS` lists each tensor once, and `CONFIG` each
setting once, with the name it has on either side. The tied head is stored once on both sides, as
`tok_emb.weight` here and `transformer.wte.weight` there.
"""

import torch

NORMS = ("ln_1", "ln_2")
LINEARS = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")  # nn.Linear here, Conv1D in GPT-2
# GPTConfig field -> transformers' GPT2Config field (dropout maps onto three of them, bias onto none:
# GPT-2 always has biases)
CONFIG = {
    "vocab_size": "vocab_size",
    "block_size": "n_positions",
    "n_layer": "n_layer",
    "n_head": "n_head",
    "n_embd": "n_embd",
    "layer_norm_eps": "layer_norm_epsilon",
    "activation": "activation_function",
    "init_std": "initializer_range",
}
DROPOUTS = ("resid_pdrop", "embd_pdrop", "attn_pdrop")
# GPT-2's shapes of a block's MLP and ln_2 tensors, C wide (Conv1D weights are (in, out))
MLP_SHAPES = {"ln_2.weight": lambda C: (C,), "ln_2.bias": lambda C: (C,), "mlp.c_fc.weight": lambda C: (C, 4 * C),
              "mlp.c_fc.bias": lambda C: (4 * C,), "mlp.c_proj.weight": lambda C: (4 * C, C),
              "mlp.c_proj.bias": lambda C: (C,)}  # fmt: skip


def weight_names(n_layer: int) -> list[tuple[str, str, bool]]:
    """(our name, GPT-2's name, transposed?) for every stored tensor of an n_layer model."""
    names = [("tok_emb.weight", "transformer.wte.weight", False), ("pos_emb.weight", "transformer.wpe.weight", False)]
    parts = [f"blocks.{i}.{part}" for i in range(n_layer) for part in NORMS + LINEARS] + ["ln_f"]
    for part in parts:
        theirs = "transformer." + part.replace("blocks.", "h.")
        linear = part.endswith(LINEARS)
        names += [(f"{part}.weight", f"{theirs}.weight", linear), (f"{part}.bias", f"{theirs}.bias", False)]
    return names


def to_gpt2(state: dict[str, torch.Tensor], n_layer: int) -> dict[str, torch.Tensor]:
    """Our tensors (tied head left out) under GPT-2's names; a missing bias (bias = false) becomes zeros,
    and so does the MLP of an attention-only block (mlp = false), with its ln_2: both compute the same
    thing (an MLP whose weights are all zero adds nothing). Returns only the tensors of the table, so
    callers check what is left."""
    tensors, C = {}, state["tok_emb.weight"].size(1)
    for ours, theirs, linear in weight_names(n_layer):
        if ours not in state and ours.split(".", 2)[-1] in MLP_SHAPES:
            shape = MLP_SHAPES[ours.split(".", 2)[-1]](C)
            tensors[theirs] = torch.zeros(shape, dtype=state["tok_emb.weight"].dtype)
        elif ours.endswith(".bias") and ours not in state:
            weight = state[ours.removesuffix("bias") + "weight"]
            tensors[theirs] = torch.zeros(weight.size(0), dtype=weight.dtype)  # (out,) for Linear and LayerNorm
        else:
            t = state[ours]
            tensors[theirs] = (t.t() if linear else t).contiguous()  # nn.Linear (out, in) -> Conv1D (in, out)
    return tensors


def from_gpt2(tensors: dict[str, torch.Tensor], n_layer: int) -> dict[str, torch.Tensor]:
    """GPT-2's tensors (every name of the table present, but an attention-only model's MLPs) under our names and
    layouts."""
    return {
        ours: (tensors[theirs].t() if linear else tensors[theirs]).contiguous()  # Conv1D (in, out) -> (out, in)
        for ours, theirs, linear in weight_names(n_layer) if theirs in tensors
    }
