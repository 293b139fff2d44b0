"""Causal scaled-dot-product attention: softmax(q k^T / sqrt(d) + causal mask) v per (batch, head).

q, k and v are (batch, heads, seq, head_dim), as a decoder's self-attention sees them (GPT-2 small's head_dim).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 2
HEADS = 8
SEQ = 1024
HEAD_DIM = 64

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"BATCH": 2, "HEADS": 4, "SEQ": 128}
SHAPES = [{"BATCH": 1, "HEADS": 3, "SEQ": 67, "HEAD_DIM": 40}, {"BATCH": 2, "HEADS": 1, "SEQ": 33, "HEAD_DIM": 16}]
# Under the evaluator's second distribution (q, k, v ~ N(0, 1) * 4) the scores reach ~100 and the softmax is sharp,
# so a different (equally valid) summation order moves outputs of magnitude ~16 by up to ~1e-4; hence atol 1e-3.
TOLERANCE = {"atol": 1e-3, "rtol": 1e-4}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def get_inputs():
    return [torch.randn(BATCH, HEADS, SEQ, HEAD_DIM), torch.randn(BATCH, HEADS, SEQ, HEAD_DIM),
            torch.randn(BATCH, HEADS, SEQ, HEAD_DIM)]


def get_init_inputs():
    return []
