"""A small pre-norm GPT-style decoder block on (batch, seq, dim) fp32 activations:

    x = x + proj(causal_attention(qkv(ln1(x))))      # multi-head, head_dim = dim / heads
    x = x + fc2(gelu(fc1(ln2(x))))                    # MLP, hidden = 4 * dim, exact GELU

No dropout. The layer norms' weights and biases are moved away from ones/zeros at construction (same RNG stream as
the linear layers), so a candidate that ignores them is caught.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 2
SEQ = 256
DIM = 384
HEADS = 6

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"BATCH": 2, "SEQ": 64, "DIM": 256, "HEADS": 4}
SHAPES = [{"BATCH": 1, "SEQ": 37, "DIM": 48, "HEADS": 3}, {"BATCH": 2, "SEQ": 5, "DIM": 40, "HEADS": 2}]


class Model(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        with torch.no_grad():
            for norm in (self.ln1, self.ln2):
                norm.weight.add_(0.1 * torch.randn(dim))
                norm.bias.add_(0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(batch, seq, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, seq, dim))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM)]


def get_init_inputs():
    return [DIM, HEADS]
