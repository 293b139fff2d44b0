"""A small GPT-style decoder: a stack of pre-norm transformer blocks (MinGPT's layout, built from torch.nn) on
(batch, seq, dim) fp32 activations, with a final layer norm.

    x = x + proj(causal_attention(qkv(ln1(x))))      # multi-head, head_dim = dim / heads
    x = x + fc2(gelu(fc1(ln2(x))))                    # MLP, hidden = 4 * dim, exact GELU

Used by `opforge model` as the worked example (README, docs/MODEL.md); no dropout, inference.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 2
SEQ = 128
DIM = 256
HEADS = 4
LAYERS = 4


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(batch, seq, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, seq, dim))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Model(nn.Module):
    def __init__(self, dim: int, heads: int, layers: int):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln_f(self.blocks(x))


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM)]


def get_init_inputs():
    return [DIM, HEADS, LAYERS]
