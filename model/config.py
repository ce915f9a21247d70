"""GPTConfig: the sizes that define a network, checked when it is made.

    GPTConfig(vocab_size=2048, block_size=256, n_layer=4, n_head=4, n_embd=128)

A TOML `[model]` table maps onto it one key per field (`vocab_size` comes from the tokenizer), and
checkpoints store `asdict(config)`. Bad values raise `ModelConfigError` with a message that names the
field and says what to do.
"""

from dataclasses import dataclass

from cli.errors import ModelConfigError

# The MLP's GELU by its transformers name -> nn.GELU's `approximate`. GPT-2's own code used the tanh
# form, under two names (a Python formula and PyTorch's kernel: equal to ~1e-7).
ACTIVATIONS = {"gelu": "none", "gelu_new": "tanh", "gelu_pytorch_tanh": "tanh"}
# Far beyond any GPT trained (GPT-3: 96 layers, 96 heads, 12,288 wide, 2,048 positions, 50,257 tokens), and
# small enough that a config asking for more is refused at once, not after minutes of building it.
MAX_SIZES = {"vocab_size": 1 << 24, "block_size": 1 << 20, "n_layer": 1 << 10, "n_head": 1 << 10, "n_embd": 1 << 16}


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass
class GPTConfig:
    vocab_size: int = 2048
    block_size: int = 256  # learned positions, so also the longest context
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = True  # biases in Linear and LayerNorm
    layer_norm_eps: float = 1e-5
    activation: str = "gelu"  # a key of ACTIVATIONS; "gelu" is the exact erf form
    mlp: bool = True  # false: attention-only blocks, the small models in which induction heads were first studied
    init_std: float = 0.02  # std of the initial weights (GPT-2's initializer_range); ~1/sqrt(n_embd) suits tiny models

    def __post_init__(self):
        for name, largest in MAX_SIZES.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ModelConfigError(f"model.{name} = {value!r} must be a positive integer; fix the [model] table")
            if value > largest:
                raise ModelConfigError(f"model.{name} = {value} is absurdly large (at most {largest:,}); fix the "
                                       f"[model] table")
        if self.n_embd % self.n_head != 0:
            raise ModelConfigError(
                f"model.n_embd = {self.n_embd} is not divisible by model.n_head = {self.n_head}; "
                "pick n_embd as a multiple of n_head (each head gets n_embd // n_head dimensions)"
            )
        if not is_number(self.dropout) or not 0 <= self.dropout < 1:
            raise ModelConfigError(f"model.dropout = {self.dropout!r} must be a number in [0, 1); 0.0 turns it off")
        if not isinstance(self.bias, bool):
            raise ModelConfigError(f"model.bias = {self.bias!r} must be true or false")
        if not is_number(self.layer_norm_eps) or not 0 < self.layer_norm_eps < 1:  # NaN fails both comparisons
            raise ModelConfigError(
                f"model.layer_norm_eps = {self.layer_norm_eps!r} must be a positive number below 1, e.g. 1e-5"
            )

        if not isinstance(self.mlp, bool):
            raise ModelConfigError(f"model.mlp = {self.mlp!r} must be true or false")
        if not is_number(self.init_std) or not 0 < self.init_std <= 1:
            raise ModelConfigError(f"model.init_std = {self.init_std!r} must be a number in (0, 1], e.g. 0.02")
        if self.activation not in ACTIVATIONS:
            raise ModelConfigError(
                f"model.activation = {self.activation!r} is not one of {', '.join(map(repr, ACTIVATIONS))}"
            )

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head
