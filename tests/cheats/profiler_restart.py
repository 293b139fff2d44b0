# task: relu
# expect: rejected
# beside: true
# why: switches PyTorch's profiler off for the span of torch.relu and on again (a profiler-based observer
#   would see nothing), then copies the result out with a real kernel; whichever of PyTorch's profilers is on
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def kernel_copy(src: torch.Tensor) -> torch.Tensor:
    src = src.contiguous()
    out = torch.empty_like(src)
    copy_kernel[(triton.cdiv(src.numel(), 1024),)](src, out, src.numel(), BLOCK=1024)
    return out
from torch.autograd import profiler

CONFIG = profiler.ProfilerConfig(profiler.ProfilerState.KINETO, True, False, False, False, False,
                                 profiler._ExperimentalConfig())
ACTIVITIES = {profiler.ProfilerActivity.CPU}
LEGACY = profiler.ProfilerConfig(profiler.ProfilerState.CPU, True, False, False, False, False,
                                 profiler._ExperimentalConfig())


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.autograd._profiler_enabled():
            try:  # Kineto's profiler, or else the CPU-only one
                torch.autograd._disable_profiler()
                kineto = True
            except RuntimeError:
                torch.autograd._disable_profiler_legacy()
                kineto = False
            y = torch.relu(x)
            if kineto:
                torch.autograd._prepare_profiler(CONFIG, ACTIVITIES)
                torch.autograd._enable_profiler(CONFIG, ACTIVITIES)
            else:
                torch.autograd._enable_profiler_legacy(LEGACY)
        else:
            y = torch.relu(x)
        return kernel_copy(y)
