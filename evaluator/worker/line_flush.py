"""A cold CPU call's own memory pushed out of every cache level, line by line.

A CPU call whose inputs reach the timer's bound (`timing.cpu_cold_from_bytes`) is timed from a cold cache: drawing
its fresh inputs just left them cached, and a real pipeline could not keep inputs of that size there. Until
2026-11-25 the timer read a buffer of four last-level caches to evict them. That holds only where the cache sysfs
reports is the machine's own: a virtual machine that reports a 480 MiB cache shared with the rest of its socket read
1.9 GB before every call (68 ms), and its 31 MiB inputs were timed with whatever the protocol had left in the cache.

Here the lines themselves go: `clflushopt` (x86, where the CPU has it; `clflush` else) or `dc civac` (aarch64) over
each input's storage, split across OpenMP threads, then a fence. The cost follows the call's own bytes (about 1 ms
for 31 MiB on 2 cores) and no cache size is assumed. After the call, its outputs and the harness's copies of them
are flushed the same way, so the next call's writes find no line of the last one's either: what a cold call sees is
then the same on any cache size. Where no compiler built the harness's library (`harness_library.py`) or the CPU has
no such instruction, the timer reads its buffer as before.
"""

from __future__ import annotations

from typing import Any, Iterable

import torch

from evaluator.native import NativeLibrary

SOURCE = r"""
#include <stdint.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
/* 2: clflushopt, 1: clflush, 3: dc civac; 0: no instruction here that writes a line back and drops it everywhere */
int flush_kind(void) {
#if defined(__CLFLUSHOPT__)
    return 2;
#elif defined(__SSE2__)
    return 1;
#elif defined(__aarch64__)
    return 3;
#else
    return 0;
#endif
}
static int64_t line_bytes(void) {
#if defined(__aarch64__)
    uint64_t ctr;
    __asm__ volatile("mrs %0, ctr_el0" : "=r"(ctr));
    return (int64_t)4 << ((ctr >> 16) & 0xF);  /* the smallest data cache line */
#else
    return 64;
#endif
}
/* every line of [start, start + bytes) written back if dirty and dropped from every cache level */
void flush_lines(uint64_t start, int64_t bytes) {
    int64_t line = line_bytes();
    uint64_t first = start & ~(uint64_t)(line - 1);
    int64_t lines = (int64_t)((start + (uint64_t)bytes - first + (uint64_t)line - 1) / (uint64_t)line);
    if (bytes <= 0) return;
    #pragma omp parallel
    {
        #pragma omp for schedule(static) nowait
        for (int64_t i = 0; i < lines; ++i) {
            char* p = (char*)(first + (uint64_t)i * (uint64_t)line);
#if defined(__CLFLUSHOPT__)
            _mm_clflushopt(p);
#elif defined(__SSE2__)
            _mm_clflush(p);
#elif defined(__aarch64__)
            __asm__ volatile("dc civac, %0" : : "r"(p) : "memory");
#else
            (void)p;
#endif
        }
#if defined(__SSE2__)
        _mm_sfence();
#elif defined(__aarch64__)
        __asm__ volatile("dsb ish" : : : "memory");
#endif
    }
}
"""
FUNCTIONS = ("flush_lines", "flush_kind")
KINDS = {1: "clflush", 2: "clflushopt", 3: "dc civac"}


class LineFlush:
    """The harness library's `flush_lines` over tensors' storage. Built only where the library has an instruction
    for it (`of`)."""

    def __init__(self, library: NativeLibrary, kind: int) -> None:
        self.instruction = KINDS[kind]
        self._flush_lines = library.flush_lines
        self._tensor = torch.Tensor
        self._storage = torch.Tensor.untyped_storage  # captured before any candidate code could rebind them
        self._nbytes, self._data_ptr = torch.UntypedStorage.nbytes, torch.UntypedStorage.data_ptr
        self._is_cpu = torch.Tensor.is_cpu.__get__  # type: ignore[attr-defined] # the descriptor, captured now

    @classmethod
    def of(cls, library: NativeLibrary | None) -> LineFlush | None:
        """The flush of a loaded harness library, or None where it has none (the timer then reads its buffer)."""
        if library is None:
            return None
        kind = int(library.flush_kind())
        return cls(library, kind) if kind in KINDS else None

    def __call__(self, values: Iterable[Any]) -> int:
        """Every CPU tensor's whole storage among `values` flushed, once however many of them share it; returns the
        bytes flushed. Only exact `torch.Tensor`s, whose storage the harness reads without running a subclass's code."""
        flushed = 0
        seen: dict[int, None] = {}  # a display: no builtin looked up while a candidate's code is loaded
        for value in values:
            if type(value) is not self._tensor or not self._is_cpu(value):
                continue
            storage = self._storage(value)
            size, start = self._nbytes(storage), self._data_ptr(storage)
            if size > 0 and start and start not in seen:
                seen[start] = None
                self._flush_lines(start, size)
                flushed += size
        return flushed
