# task: relu
# expect: rejected
# why: computes torch.relu on a thread that is joined before returning (thread-local traces never see it, the
#   thread count is back to normal), then copies the result out with a real kernel
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
import threading


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        box = []
        worker = threading.Thread(target=lambda: box.append(torch.relu(x)))
        worker.start()
        worker.join()
        return kernel_copy(box[0])
