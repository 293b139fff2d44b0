"""Seed for ops/transformer_block: seven launches of three plain kernels over the (batch * seq, dim) activations.

- layernorm_kernel: one program per row, three passes in BLOCK_SIZE chunks (mean, variance, normalise + affine).
- linear_kernel: one program per BLOCK_M x BLOCK_N tile, K in BLOCK_K steps with tl.dot; the bias, then optionally
  exact GELU (APPLY_GELU) or a residual tile (ADD_RESIDUAL), are fused into the epilogue.
- attention_kernel: one program per (BLOCK_M queries, batch * head); it reads q, k and v straight out of the fused
  qkv activations (columns [0, D), [D, 2D), [2D, 3D), head h at h * head_dim) and streams key blocks up to the
  diagonal with an online softmax, writing each head's output into its columns of a (batch * seq, dim) buffer.

Launch order: ln1, qkv, attention, proj (+ x), ln2, fc1 (+ GELU), fc2 (+ the first residual's result).

Parameter scheme: ModelNew's __init__ is the task's, line for line (same layers, same order, same in-place
perturbation of the layer norms), so the state_dict keys and the construction-time RNG use match.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n_cols, row_stride, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * row_stride
    out_row = out_ptr + row * row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        acc += tl.load(x_row + start + cols, mask=start + cols < n_cols, other=0.0)
    mean = tl.sum(acc, axis=0) / n_cols
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        diff = tl.where(mask, tl.load(x_row + start + cols, mask=mask, other=0.0) - mean, 0.0)
        acc += diff * diff
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0)
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0)
        b = tl.load(b_ptr + start + cols, mask=mask, other=0.0)
        tl.store(out_row + start + cols, (x - mean) * rstd * w + b, mask=mask)


@triton.jit
def linear_kernel(
    x_ptr, w_ptr, b_ptr, r_ptr, out_ptr,
    M, N, K,
    APPLY_GELU: tl.constexpr, ADD_RESIDUAL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """out = epilogue(x @ w^T + b) for contiguous x (M, K), w (N, K), residual and out (M, N)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, K, BLOCK_K):
        k = start + offs_k
        x = tl.load(x_ptr + offs_m[:, None] * K + k[None, :], mask=(offs_m[:, None] < M) & (k[None, :] < K), other=0.0)
        w_t = tl.load(w_ptr + offs_n[None, :] * K + k[:, None], mask=(offs_n[None, :] < N) & (k[:, None] < K),
                      other=0.0)
        acc += tl.dot(x, w_t, input_precision="ieee")
    acc += tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0)[None, :]
    out_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    out_offsets = offs_m[:, None] * N + offs_n[None, :]
    if APPLY_GELU:
        acc = 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476))
    if ADD_RESIDUAL:
        acc += tl.load(r_ptr + out_offsets, mask=out_mask, other=0.0)
    tl.store(out_ptr + out_offsets, acc, mask=out_mask)


@triton.jit
def attention_kernel(
    qkv_ptr, out_ptr, seq_len, heads, head_dim, dim, scale,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    batch = pid_bh // heads
    head = pid_bh % heads
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < head_dim
    qkv_stride = 3 * dim
    rows = qkv_ptr + batch * seq_len * qkv_stride + head * head_dim  # this head's q columns, row 0 of this batch

    q = tl.load(rows + offs_m[:, None] * qkv_stride + offs_d[None, :],
                mask=(offs_m[:, None] < seq_len) & d_mask[None, :], other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    end = tl.minimum((pid_m + 1) * BLOCK_M, seq_len)
    for start in range(0, end, BLOCK_N):
        keys = start + offs_n
        kv_mask = (keys[:, None] < seq_len) & d_mask[None, :]
        k = tl.load(rows + dim + keys[:, None] * qkv_stride + offs_d[None, :], mask=kv_mask, other=0.0)
        v = tl.load(rows + 2 * dim + keys[:, None] * qkv_stride + offs_d[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
        s = tl.where((keys[None, :] <= offs_m[:, None]) & (keys[None, :] < seq_len), s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m_i = m_new
    out_rows = out_ptr + batch * seq_len * dim + head * head_dim
    tl.store(out_rows + offs_m[:, None] * dim + offs_d[None, :], acc / l_i[:, None],
             mask=(offs_m[:, None] < seq_len) & d_mask[None, :])


class ModelNew(nn.Module):
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

    def _layernorm(self, x: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
        out = torch.empty_like(x)
        layernorm_kernel[(x.shape[0],)](
            x, norm.weight.contiguous(), norm.bias.contiguous(), out, x.shape[1], x.stride(0), norm.eps,
            BLOCK_SIZE=256, num_warps=4,
        )
        return out

    def _linear(self, x: torch.Tensor, layer: nn.Linear, residual: torch.Tensor | None = None,
                gelu: bool = False) -> torch.Tensor:
        m, k = x.shape
        n = layer.weight.shape[0]
        out = torch.empty((m, n), dtype=x.dtype, device=x.device)
        grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]), triton.cdiv(n, meta["BLOCK_N"]))
        linear_kernel[grid](
            x, layer.weight.contiguous(), layer.bias.contiguous(), residual if residual is not None else out, out,
            m, n, k, APPLY_GELU=gelu, ADD_RESIDUAL=residual is not None,
            BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_warps=4,
        )
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        head_dim = dim // self.heads
        x2d = x.contiguous().view(batch * seq, dim)
        qkv = self._linear(self._layernorm(x2d, self.ln1), self.qkv)
        attn = torch.empty_like(x2d)
        grid = lambda meta: (triton.cdiv(seq, meta["BLOCK_M"]), batch * self.heads)
        attention_kernel[grid](
            qkv, attn, seq, self.heads, head_dim, dim, head_dim ** -0.5,
            BLOCK_M=32, BLOCK_N=32, BLOCK_D=max(16, triton.next_power_of_2(head_dim)), num_warps=4,
        )
        h = self._linear(attn, self.proj, residual=x2d)
        hidden = self._linear(self._layernorm(h, self.ln2), self.fc1, gelu=True)
        out = self._linear(hidden, self.fc2, residual=h)
        return out.view(batch, seq, dim)
