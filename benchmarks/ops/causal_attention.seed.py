"""Seed for ops/causal_attention: one program per (BLOCK_M query rows, batch * head), streaming over the key/value
blocks up to the diagonal with an online softmax (running max and sum, rescaled accumulator), as in
FlashAttention. The head dimension is padded to a power of two (at least 16) and masked.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def causal_attention_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr,
    seq_len, head_dim, scale,
    stride_qh, stride_qs, stride_kh, stride_ks, stride_vh, stride_vs, stride_oh, stride_os,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):
    pid_m = tl.program_id(0)
    head = tl.program_id(1)  # batch * heads + head
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < head_dim

    q = tl.load(q_ptr + head * stride_qh + offs_m[:, None] * stride_qs + offs_d[None, :],
                mask=(offs_m[:, None] < seq_len) & d_mask[None, :], other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    end = tl.minimum((pid_m + 1) * BLOCK_M, seq_len)  # keys past the block's last query are all masked
    for start in range(0, end, BLOCK_N):
        keys = start + offs_n
        kv_mask = (keys[:, None] < seq_len) & d_mask[None, :]
        k = tl.load(k_ptr + head * stride_kh + keys[:, None] * stride_ks + offs_d[None, :], mask=kv_mask, other=0.0)
        v = tl.load(v_ptr + head * stride_vh + keys[:, None] * stride_vs + offs_d[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
        allowed = (keys[None, :] <= offs_m[:, None]) & (keys[None, :] < seq_len)
        s = tl.where(allowed, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m_i = m_new

    out = acc / l_i[:, None]
    tl.store(out_ptr + head * stride_oh + offs_m[:, None] * stride_os + offs_d[None, :], out,
             mask=(offs_m[:, None] < seq_len) & d_mask[None, :])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        batch, heads, seq_len, head_dim = q.shape
        q3 = q.contiguous().view(batch * heads, seq_len, head_dim)
        k3 = k.contiguous().view(batch * heads, seq_len, head_dim)
        v3 = v.contiguous().view(batch * heads, seq_len, head_dim)
        out = torch.empty_like(q3)
        block_d = max(16, triton.next_power_of_2(head_dim))
        grid = lambda meta: (triton.cdiv(seq_len, meta["BLOCK_M"]), batch * heads)
        causal_attention_kernel[grid](
            q3, k3, v3, out, seq_len, head_dim, head_dim ** -0.5,
            q3.stride(0), q3.stride(1), k3.stride(0), k3.stride(1), v3.stride(0), v3.stride(1),
            out.stride(0), out.stride(1),
            BLOCK_M=32, BLOCK_N=32, BLOCK_D=block_d, num_warps=4,
        )
        return out.view(batch, heads, seq_len, head_dim)
