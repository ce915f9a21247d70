"""The speed layer: faster variants of the network's parts, put on a built model once, as torch.compile is.

    model = GPT(config).to(device)   # the textbook network: model/gpt.py and model/attention.py
    speed_up(model)                  # the same numbers, sooner (but dropout's masks): the variants below, in place
    speed_up(model, weights="int8")  # and a decoded token multiplies by int8 copies of the matrices (CPU)

Without it, model/gpt.py and model/attention.py are all the network code that runs, a training step and a
decoded token included (`train.speed_up = false`, `generate.py --no-speed-up`). With it, each part below
computes what the part it stands in for computes, up to rounding (each file's tests say how close; dropout draws
other masks of the same distribution), and the choices that depend on the device are made here, once, for the
device the model is on now; so move the model first (a model moved afterwards still computes the same numbers,
with the first device's choice):

    attention   FastCausalSelfAttention  its `combine`: a fused kernel, or the textbook steps in fewer passes (CPU;
                                         kernels.py); `need_attn=True` never calls it: the textbook steps
    dropout     CheapDropout             a Bernoulli mask of the same p drawn a cheaper way (CPU, a model in
                                         training mode when put on; kernels.py)
    loss        FastGPT.loss             the training loss a slice of logits at a time (CPU; fast_gpt.py)
    decoding    FastGPT.forward          one cached token without module calls, fp32 or bf16/int8 copies of the
                                         weights (CPU; fast_gpt.py, decode_weights.py)

Each swap changes a module's class, not its parameters or buffers (the way torch.nn.utils.parametrize
changes a module's class): state_dict, checkpoints, optimizer and hooks see the same tensors as before.
"""

from torch import nn

from model.attention import CausalSelfAttention
from model.gpt import GPT
from model.speed.decode_weights import check_format
from model.speed.fast_gpt import FastGPT
from model.speed.kernels import CheapDropout, FastCausalSelfAttention, kernel_for


def speed_up(model: nn.Module, weights: str = "fp32") -> nn.Module:
    """Swap the faster variants into `model` (a GPT, or any module holding its parts; in place, and returned),
    for the device its weights are on (the cheap dropout only into a model in training mode: one loaded for
    inference keeps nn.Dropout, which it calls in eval mode alone, where both pass x through); `weights` "bf16"
    or "int8": the decoding step's matrices in that format (a GPT on a CPU in fp32; model/speed/decode_weights.py)."""
    device = next(model.parameters()).device
    if isinstance(model, GPT):
        check_format(weights, model)
    for module in model.modules():
        if isinstance(module, CausalSelfAttention):
            module.__class__ = FastCausalSelfAttention
            module.kernel = kernel_for(device)
        elif type(module) is nn.Dropout and device.type == "cpu" and model.training:  # a GPU draws its mask fast;
            module.__class__ = CheapDropout  # a model put on for inference (eval mode) never draws one
    if isinstance(model, GPT):
        model.__class__ = FastGPT
        model.weights = weights
    return model


def is_sped_up(model: nn.Module) -> bool:
    """Whether `speed_up` has been put on this model."""
    return isinstance(model, FastGPT)
