"""Layer norm's backward pass for its input: given the upstream gradient dy and the saved input x, the gradient
with respect to x of F.layer_norm(x, (D,), weight) over the last dimension (row-wise).

The reference asks autograd, so the task is defined by PyTorch's own layer norm; the weight starts away from ones so
a candidate that ignores it is caught (the bias does not affect this gradient, so the layer has none).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 3968
DIM = 2048

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"BATCH": 128}
SHAPES = [{"BATCH": 67, "DIM": 1000}, {"BATCH": 3, "DIM": 4099}]


class Model(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.dim = dim
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, grad_output: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            x = x.detach().requires_grad_(True)
            y = F.layer_norm(x, (self.dim,), self.weight.detach(), None, self.eps)
            (grad_x,) = torch.autograd.grad(y, x, grad_output)
        return grad_x


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM) * 2.0 + 0.5]


def get_init_inputs():
    return [DIM]
