"""The speed layer: faster variants of the network's parts, put on a built model once, as torch.compile is.

    model = GPT(config).to(device)   # the textbook network: model/gpt.py and model/attention.py
    speed_up(model)                  # the same numbers, sooner (but dropout's masks): the variants below, in place

Without it, model/gpt.py and model/attention.py are all the network code that runs, a training step and a
decoded token included (`train.speed_up = false`, `generate.py --no-speed-up`). With it, each part below
computes what the part it stands in for computes, up to rounding (each file's tests say how close), and
the choices that depend on the device are made here, once, for the device the model is on now; so move
the model first (a model moved afterwards still computes the same numbers, with the first device's choice):

    attention   FastCausalSelfAttention  a fused kernel, or the textbook steps in fewer passes (CPU)
                                         (attention_kernels.py); `need_attn=True` keeps the textbook steps
    dropout     CheapDropout             the same Bernoulli mask drawn a cheaper way (CPU; dropout.py)
    loss        FastGPT.loss             the training loss a slice of logits at a time (CPU; head_loss.py)
    decoding    FastGPT.decode_step      one token without module calls, fp32 or bf16/int8 copies of the
                                         weights (CPU; decode_step.py, decode_weights.py)

Each swap changes a module's class, not its parameters or buffers (the way torch.nn.utils.parametrize
changes a module's class): state_dict, checkpoints, optimizer and hooks see the same tensors as before.
"""

from torch import nn

from model.attention import CausalSelfAttention
from model.gpt import GPT
from model.speed.attention_kernels import FastCausalSelfAttention, kernel_for
from model.speed.decode_step import fast_decode_step
from model.speed.dropout import CheapDropout
from model.speed.head_loss import sliced_loss


class FastGPT(GPT):
    """model/gpt.py's GPT with the training loss in slices and the module-free decoding step."""

    def loss(self, x, targets):
        return sliced_loss(x, self.lm_head.weight, targets)

    def decode_step(self, weights: str = "fp32"):
        return fast_decode_step(self, weights)


def speed_up(model: nn.Module) -> nn.Module:
    """Swap the faster variants into `model` (a GPT, or any module holding its parts; in place, and returned),
    for the device its weights are on."""
    device = next(model.parameters()).device
    for module in model.modules():
        if isinstance(module, CausalSelfAttention):
            module.__class__ = FastCausalSelfAttention
            module.kernel = kernel_for(device)
        elif type(module) is nn.Dropout and device.type == "cpu":  # a GPU draws nn.Dropout's mask fast
            module.__class__ = CheapDropout
    if isinstance(model, GPT):
        model.__class__ = FastGPT
    return model


def is_sped_up(model: nn.Module) -> bool:
    """Whether `speed_up` has been put on this model."""
    return isinstance(model, FastGPT)
