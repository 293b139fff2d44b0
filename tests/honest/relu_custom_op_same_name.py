# task: relu
# expect: ok
# max-abs-error: 1e-6
# why: honest Triton kernel behind torch.library.custom_op in its own namespace under PyTorch's name (myrelu::relu):
#   a candidate's operator is not PyTorch's relu, so it is not a recomputation of the reference.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask, other=0.0), 0.0), mask=mask)


def launch(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK_SIZE=1024)
    return out


@torch.library.custom_op("myrelu::relu", mutates_args=())
def my_relu(x: torch.Tensor) -> torch.Tensor:
    return launch(x)


@my_relu.register_fake
def _(x):
    return torch.empty_like(x)


class ModelNew(nn.Module):
    def forward(self, x):
        return my_relu(x)
