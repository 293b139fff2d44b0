"""Rotary position embedding (RoPE) as in LLaMA: cos/sin tables of two equal halves (the layout Liger's and unsloth's
kernels assume, reading only the first half), the same for every seed; x is random."""

import torch
import torch.nn as nn

batch_size = 2
heads = 4
seq_len = 32
head_dim = 64

SHAPES = [{"batch_size": 1, "heads": 3, "seq_len": 17, "head_dim": 32}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin


def get_inputs():
    inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    freqs = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return [torch.randn(batch_size, heads, seq_len, head_dim), emb.cos(), emb.sin()]


def get_init_inputs():
    return []
