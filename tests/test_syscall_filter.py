"""The candidate worker's seccomp filter (`evaluator/syscall_filter.py`): threads, forks and PyTorch's thread pool work
under it, `clone3` says it does not exist, and `clone(CLONE_PARENT)` (a sibling outside the worker's tree) kills."""

from __future__ import annotations

import platform
import signal
import subprocess
import sys

import pytest

from evaluator.syscall_filter import program

UNDER_FILTER = """
import ctypes, os, threading
from evaluator.syscall_filter import keep_processes_in_tree, CLONE_PARENT
assert keep_processes_in_tree()
t = threading.Thread(target=lambda: None)
t.start()
t.join()
import torch
torch.set_num_threads(2)
assert torch.ones(1 << 22).sum().item() == 1 << 22
pid = os.fork()
if pid == 0:
    os._exit(3)
assert os.waitpid(pid, 0)[1] >> 8 == 3
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
assert libc.syscall(435, 0, 0) == -1 and ctypes.get_errno() == 38  # clone3: ENOSYS
print("ok", flush=True)
if {parent}:
    libc.syscall({clone}, CLONE_PARENT | 17, 0, 0, 0, 0)
    print("survived", flush=True)
"""


@pytest.mark.skipif(program(platform.machine()) is None, reason="no syscall numbers for this machine")
@pytest.mark.parametrize("parent", [False, True])
def test_the_filter_keeps_processes_in_the_tree(parent: bool):
    clone = {"x86_64": 56, "aarch64": 220}[platform.machine()]
    run = subprocess.run([sys.executable, "-c", UNDER_FILTER.format(parent=parent, clone=clone)],
                         capture_output=True, text=True, timeout=120)
    assert run.stdout.split() == ["ok"], run.stderr
    assert run.returncode == (-signal.SIGSYS if parent else 0), run.stderr


def test_no_program_for_an_unknown_machine():
    assert program("pdp11") is None
    assert len(program("x86_64") or []) == 11
