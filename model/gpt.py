"""GPT: token + learned position embeddings, pre-LayerNorm blocks, final LayerNorm, tied LM head.

    model = GPT(GPTConfig(vocab_size=2048))
    logits, loss = model(idx, targets)              # logits (B, T, V), mean cross-entropy
    _, loss = model(idx, targets, loss_only=True)   # training: the loss alone (the logits are not kept)
    logits, _ = model(idx)                          # inference: last position only, (B, 1, V)
    logits, maps = model.forward_with_attention(idx)  # maps (B, n_layer, n_head, T, T)
    out = model.generate(idx, max_new_tokens=50, temperature=0)   # see model/sampling.py

Attention lives in model/attention.py, the KV cache in model/kv_cache.py and decoding in model/sampling.py.
This file and attention.py are the whole network: `model.speed.speed_up(model)` may put faster variants of
some of its parts in place afterwards (model/speed/), each computing the same numbers. Checkpoint files are
storage/checkpoint.py's (`save_model`, `load_model`): the network knows nothing of files.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from cli.errors import ModelInputError
from model import sampling
from model.attention import CausalSelfAttention
from model.config import ACTIVATIONS, GPTConfig
from model.kv_cache import KVCache


def logits_loss(logits, targets) -> torch.Tensor:
    """The mean cross-entropy of logits (..., V) against targets (...), where a target of -1 is ignored."""
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU(approximate=ACTIVATIONS[config.activation])  # exact erf form, or GPT-2's tanh
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        h = self.gelu(self.c_fc(x))  # (B, T, 4C)
        return self.dropout(self.c_proj(h))  # (B, T, C)


class Block(nn.Module):
    """Pre-LN transformer block: x + attn(ln_1(x)), then x + mlp(ln_2(x)) (left out when config.mlp is false)."""

    def __init__(self, config, layer: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps, bias=config.bias)
        self.attn = CausalSelfAttention(config, layer)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps, bias=config.bias) if config.mlp else None
        self.mlp = MLP(config) if config.mlp else None

    def forward(self, x, kv_cache=None, need_attn: bool = False):
        y, att = self.attn(self.ln_1(x), kv_cache, need_attn)
        x = x + y
        if self.mlp is not None:
            x = x + self.mlp(self.ln_2(x))
        return x, att


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.n_embd)
        self.pos_emb = nn.Embedding(config.block_size, config.n_embd)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config, layer) for layer in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps, bias=config.bias)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight  # tied: one matrix reads and writes tokens
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=config.init_std)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        # GPT-2: each residual branch adds to the stream, so its output projection starts smaller
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=config.init_std / math.sqrt(2 * config.n_layer))

    def _trunk(self, idx, kv_cache, need_attn):
        """idx (B, T) -> final hidden states (B, T, C) and one attention map per layer (or Nones)."""
        T = idx.size(1)
        pos = 0 if kv_cache is None else kv_cache.pos
        if pos + T > self.config.block_size:
            where = f"{T} tokens" if pos == 0 else f"{T} tokens after {pos} cached ones"
            raise ModelInputError(
                f"{where} exceed the model's block_size of {self.config.block_size}; "
                f"give at most {self.config.block_size - pos} tokens (crop to the most recent ones)"
            )
        x = self.drop(self.tok_emb(idx) + self.pos_emb.weight[pos : pos + T])  # (B, T, C)
        maps = []
        for block in self.blocks:
            x, att = block(x, kv_cache, need_attn)
            maps.append(att)
        if kv_cache is not None:
            kv_cache.advance(T)
        return self.ln_f(x), maps

    def forward(self, idx, targets=None, kv_cache=None, all_logits=False, loss_only=False):
        """idx (B, T) -> `(logits, loss)`.

        With targets (B, T) (-1 = ignore): logits (B, T, V) and the mean cross-entropy; with `loss_only`,
        logits None and the same loss (`self.loss`: returned alone, the logits need not be kept). Without
        targets: logits of the last position only, (B, 1, V), unless `all_logits`; loss is None.
        With a KVCache, idx continues the cached tokens: positions start at `kv_cache.pos`.
        """
        x, _ = self._trunk(idx, kv_cache, need_attn=False)
        if targets is None:
            logits = self.lm_head(x if all_logits else x[:, -1:])  # (B, T or 1, V)
            return logits, None
        if loss_only:  # what training needs
            return None, self.loss(x, targets)
        logits = self.lm_head(x)  # (B, T, V)
        return logits, logits_loss(logits, targets)

    def loss(self, x, targets) -> torch.Tensor:
        """Final hidden states x (B, T, C) -> the mean cross-entropy of their logits against targets (B, T)."""
        return logits_loss(self.lm_head(x), targets)

    def forward_with_attention(self, idx, kv_cache=None):
        """idx (B, T) -> `(logits (B, T, V), maps (B, n_layer, n_head, T, Tk))`, eval-only inspection.

        The same blocks as `forward`, each returning its attention, so the maps are the very attention
        that produced the logits. With a KVCache, idx continues the cached tokens and
        Tk = kv_cache.pos + T: a decoding step gives one row per layer and head.
        """
        x, maps = self._trunk(idx, kv_cache, need_attn=True)
        return self.lm_head(x), torch.stack(maps, dim=1)  # maps: (B, L, nh, T, Tk)

    def attention_maps(self, idx):
        """idx (B, T) -> attention (B, n_layer, n_head, T, T); every row sums to 1."""
        return self.forward_with_attention(idx)[1]

    def new_kv_cache(self, batch_size: int, max_len=None, dtype=None, device=None) -> KVCache:
        """An empty cache for this model (max_len defaults to block_size, dtype/device to the weights')."""
        c, w = self.config, self.tok_emb.weight
        return KVCache(
            c.n_layer, batch_size, c.n_head, max_len or c.block_size, c.head_dim,
            dtype=dtype or w.dtype, device=device or w.device,
        )  # fmt: skip

    def num_params(self, non_embedding: bool = False) -> int:
        """Parameters, the tied embedding/head counted once; `non_embedding` leaves out both embeddings."""
        n = sum(p.numel() for p in self.parameters())  # parameters() yields a shared tensor once
        if non_embedding:
            n -= self.tok_emb.weight.numel() + self.pos_emb.weight.numel()
        return n

    def flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs (forward + backward) per token at context seq_len: 6N + 12·L·d·T.

        N counts every weight used in a matmul: the non-embedding parameters plus the LM head (the
        tied embedding), not the position table, which is only looked up.
        """
        c = self.config
        n = self.num_params(non_embedding=True) + self.tok_emb.weight.numel()
        return 6 * n + 12 * c.n_layer * c.n_embd * seq_len

    def generate(self, idx, max_new_tokens, **options):
        """See `model.sampling.generate`."""
        return sampling.generate(self, idx, max_new_tokens, **options)

    def stream(self, idx, max_new_tokens, **options):
        """See `model.sampling.stream`."""
        return sampling.stream(self, idx, max_new_tokens, **options)
