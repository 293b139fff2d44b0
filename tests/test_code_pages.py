"""The driver's read of machine code that a process rewrote (`evaluator/verify/code_pages.py`), on real processes:
one that writes a byte of the C library's code (the same byte back: the page still becomes its own copy) and one
that runs PyTorch, OpenMP and a library loaded from tmpfs honestly."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from evaluator.driver.connection import Refused
from evaluator.verify.code_pages import WrittenCode, read_written_code, refuse_written_code, written_code

SMAPS = """\
7f0000000000-7f0000001000 r-xp 00000000 08:01 1234 /usr/lib/libc.so.6
Private_Dirty:         4 kB
Anonymous:             4 kB
7f0000001000-7f0000002000 r--p 00001000 08:01 1234 /usr/lib/libc.so.6
Anonymous:             4 kB
7f0000002000-7f0000003000 rwxp 00000000 00:2a 99 /tmp/libx.so
Anonymous:             0 kB
7f0000003000-7f0000004000 r-xp 00000000 00:2a 98 /dev/shm/libharness.so
Private_Dirty:         4 kB
Anonymous:             0 kB
7f0000004000-7f0000005000 rwxp 00000000 00:00 0
Anonymous:             4 kB
"""


def test_only_executable_file_mappings_with_copied_pages_or_write_access_count():
    # libc's code page copied: counted; its read-only data page copied: not code; a writable code mapping: counted;
    # a tmpfs library dirty in the page cache but not copied: not counted; anonymous JIT memory: not judged
    assert written_code(SMAPS) == [WrittenCode("/usr/lib/libc.so.6", 4, False), WrittenCode("/tmp/libx.so", 0, True)]


def _process(code: str) -> subprocess.Popen:
    """A Python process that runs `code`, prints "ready" and waits for its standard input to close."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code) + "\nprint('ready', flush=True)\n"
                             "import sys; sys.stdin.read()\n"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


@pytest.fixture
def spawn():
    started: list[subprocess.Popen] = []

    def start(code: str) -> subprocess.Popen:
        proc = _process(code)
        started.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        return proc

    yield start
    for proc in started:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(timeout=30)


PATCH_ONE_BYTE = """
import ctypes, mmap
libc = ctypes.CDLL(None, use_errno=True)
at = ctypes.cast(libc.clock_gettime, ctypes.c_void_p).value
page = at & ~(mmap.PAGESIZE - 1)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
assert libc.mprotect(page, mmap.PAGESIZE, 7) == 0  # read, write, execute
byte = ctypes.c_ubyte.from_address(at)
byte.value = byte.value  # the same byte back: the page is the process's own copy all the same
assert libc.mprotect(page, mmap.PAGESIZE, 5) == 0  # read, execute again
"""


def test_a_process_that_wrote_to_its_c_library_code_is_found_after_it_made_the_page_read_only(spawn):
    proc = spawn(PATCH_ONE_BYTE)
    written = read_written_code(proc.pid)
    assert written is not None and any("libc" in w.path and w.dirty_kib >= 4 and not w.writable for w in written)
    with pytest.raises(Refused, match="rewrote machine code"):
        refuse_written_code(proc.pid)


def test_an_honest_process_with_pytorch_openmp_and_a_tmpfs_library_has_no_written_code(spawn, tmp_path):
    source = tmp_path / "scale.c"
    source.write_text("void scale(float* x, long n) {\n#pragma omp parallel for\n"
                      "for (long i = 0; i < n; ++i) x[i] *= 2.0f; }\n")
    library = "/dev/shm/opforge-test-scale.so"
    subprocess.run(["gcc", "-O2", "-fPIC", "-shared", "-fopenmp", str(source), "-o", library], check=True)
    try:
        proc = spawn(f"""
            import ctypes, torch
            lib = ctypes.CDLL({library!r})
            x = torch.randn(1 << 20)
            lib.scale(ctypes.c_void_p(x.data_ptr()), ctypes.c_long(x.numel()))
            y = torch.nn.functional.softmax(x, 0) @ x  # PyTorch's own kernels and threads
            """)
        assert read_written_code(proc.pid) == []
        assert refuse_written_code(proc.pid) is True
    finally:
        import os
        os.unlink(library)


def test_a_process_that_cannot_be_read_is_not_judged():
    assert read_written_code(2 ** 22 + 12345) is None  # no such process
    assert refuse_written_code(None) is False
