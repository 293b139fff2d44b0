"""The offline tuner: which literals are tunables, which neighbours it proposes, and that they stay valid programs."""

from __future__ import annotations

import ast
import asyncio
import io
import json
import os
import re
import subprocess
import sys
import textwrap
import tokenize
from pathlib import Path

from agents.proposal import Scored
from agents.tuner import TuneProposer, describe_tunables, neighbours
from agents.tunables import find_tunables
from evaluator.candidate import Candidate

VECTOR_ADD = textwrap.dedent('''\
    import torch
    import torch.nn as nn
    import triton
    import triton.language as tl


    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
        pid = tl.program_id(axis=0)
        offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask)
        y = tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, x + y, mask=mask)


    class ModelNew(nn.Module):
        def forward(self, x, y):
            out = torch.empty_like(x)
            n = out.numel()
            grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
            add_kernel[grid](x, y, out, n, BLOCK_SIZE=128, num_warps=4)
            return out
''')

# The same kernel with the block size written twice: in the grid and at the launch.
VECTOR_ADD_FIXED_GRID = VECTOR_ADD.replace(
    'grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)', "grid = (triton.cdiv(n, 128),)"
)

SOFTMAX = textwrap.dedent('''\
    import torch
    import torch.nn as nn
    import triton
    import triton.language as tl

    SCALE = 3


    @triton.jit
    def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK_SIZE: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK_SIZE)
        x = tl.load(in_ptr + row * in_stride + cols, mask=cols < n_cols, other=-float("inf"))
        num = tl.exp(x - tl.max(x, axis=0))
        tl.store(out_ptr + row * out_stride + cols, num / tl.sum(num, axis=0), mask=cols < n_cols)


    class ModelNew(nn.Module):
        def forward(self, x):
            n_rows, n_cols = x.shape
            BLOCK_SIZE = triton.next_power_of_2(n_cols)
            y = torch.empty_like(x)
            softmax_kernel[(n_rows,)](
                y, x, x.stride(0), y.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=8, num_stages=2
            )
            return y * SCALE / SCALE
''')

MODULE_CONSTANTS = textwrap.dedent('''\
    import torch
    import triton

    BLOCK = 256
    N = 4096
    NUM_WARPS: int = 4


    def launch(kernel, x):
        grid = (triton.cdiv(x.numel(), BLOCK),)
        kernel[grid](x, x.numel(), BLOCK_SIZE=BLOCK, ACTIVATION=1, num_warps=NUM_WARPS)
''')

CUDA = textwrap.dedent('''\
    import torch
    import torch.nn as nn
    from torch.utils.cpp_extension import load_inline

    N = 4096

    cuda_source = r"""
    #include <torch/extension.h>
    #define THREADS 256
    #define WARP_SIZE 32
    constexpr int TILE = 32;

    __global__ void relu_kernel(const float* x, float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
    }

    torch::Tensor relu_cuda(torch::Tensor x) {
        auto y = torch::empty_like(x);
        int n = x.numel();
        relu_kernel<<<(n + THREADS - 1) / THREADS, THREADS>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
        return y;
    }
    """
    cpp_source = "torch::Tensor relu_cuda(torch::Tensor x);"


    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            self.relu = load_inline(name="relu", cpp_sources=cpp_source, cuda_sources=cuda_source,
                                    functions=["relu_cuda"])

        def forward(self, x):
            return self.relu.relu_cuda(x)
''')

NO_TUNABLES = textwrap.dedent('''\
    import torch.nn as nn


    class ModelNew(nn.Module):
        def forward(self, x):
            return x.relu()
''')


def changed_tokens(old: str, new: str) -> list[tuple[str, str]]:
    """The (old, new) Python tokens that differ; the token streams must line up one to one."""
    def toks(src: str) -> list[tokenize.TokenInfo]:
        return list(tokenize.generate_tokens(io.StringIO(src).readline))
    a, b = toks(old), toks(new)
    assert len(a) == len(b)
    return [(x.string, y.string) for x, y in zip(a, b) if x.string != y.string]


def changed_region(old: str, new: str) -> tuple[str, str]:
    """The differing middle of two strings, after their common prefix and suffix."""
    p = 0
    while p < min(len(old), len(new)) and old[p] == new[p]:
        p += 1
    s = 0
    while s < min(len(old), len(new)) - p and old[-1 - s] == new[-1 - s]:
        s += 1
    return old[p:len(old) - s], new[p:len(new) - s]


def test_triton_launch_literals_are_tunables() -> None:
    assert describe_tunables(VECTOR_ADD) == {"BLOCK_SIZE": 128, "num_warps": 4}


def test_one_step_neighbours_change_exactly_one_literal_and_parse() -> None:
    found = neighbours(VECTOR_ADD, max_changes=1)
    assert sorted(note for _, note in found) == [
        "BLOCK_SIZE 128->256", "BLOCK_SIZE 128->64", "num_warps 4->2", "num_warps 4->8"
    ]
    for src, note in found:
        ast.parse(src)
        name, change = note.split()
        before, after = change.split("->")
        assert changed_tokens(VECTOR_ADD, src) == [(before, after)]
        assert re.search(rf"\b{name}={after}\b", src)


def test_two_step_neighbours_change_two_parameters() -> None:
    pairs = [(src, note) for src, note in neighbours(VECTOR_ADD) if ", " in note]
    assert len(pairs) == 4  # 2 block sizes x 2 warp counts
    for src, _ in pairs:
        assert len(changed_tokens(VECTOR_ADD, src)) == 2


def test_computed_block_size_and_flags_are_not_tunables() -> None:
    assert describe_tunables(SOFTMAX) == {"num_warps": 8, "num_stages": 2}
    assert {note for _, note in neighbours(SOFTMAX, max_changes=1)} == {
        "num_warps 8->4", "num_warps 8->16", "num_stages 2->1", "num_stages 2->3"
    }


def test_module_constants_that_feed_a_launch_are_tunables() -> None:
    assert describe_tunables(MODULE_CONSTANTS) == {"BLOCK": 256, "NUM_WARPS": 4}
    by_note = dict((note, src) for src, note in neighbours(MODULE_CONSTANTS, max_changes=1))
    assert set(by_note) == {"BLOCK 256->128", "BLOCK 256->512", "NUM_WARPS 4->2", "NUM_WARPS 4->8"}
    src = by_note["BLOCK 256->512"]
    assert changed_tokens(MODULE_CONSTANTS, src) == [("256", "512")]
    assert "BLOCK = 512\nN = 4096\n" in src


def test_grid_literal_changes_with_the_launch_literal() -> None:
    by_note = dict((note, src) for src, note in neighbours(VECTOR_ADD_FIXED_GRID, max_changes=1))
    src = by_note["BLOCK_SIZE 128->64"]
    assert changed_tokens(VECTOR_ADD_FIXED_GRID, src) == [("128", "64"), ("128", "64")]
    assert "triton.cdiv(n, 64)" in src and "BLOCK_SIZE=64," in src


def test_cuda_defines_and_constexprs_are_tunables() -> None:
    assert describe_tunables(CUDA) == {"THREADS": 256, "TILE": 32}
    found = neighbours(CUDA, max_changes=1)
    assert sorted(note for _, note in found) == [
        "THREADS 256->128", "THREADS 256->512", "TILE 32->16", "TILE 32->64"
    ]
    for src, note in found:
        ast.parse(src)
        before, after = note.split()[1].split("->")
        assert changed_region(CUDA, src) == (before, after)
    by_note = dict((note, src) for src, note in found)
    assert "#define THREADS 512\n" in by_note["THREADS 256->512"]
    assert "constexpr int TILE = 16;" in by_note["TILE 32->16"]


def test_cuda_block_sizes_stay_within_a_thread_block() -> None:
    src = CUDA.replace("#define THREADS 256", "#define THREADS 1024")
    assert {note for _, note in neighbours(src, max_changes=1) if note.startswith("THREADS")} == {
        "THREADS 1024->512"
    }


def test_native_c_block_sizes_are_chunks_of_work_not_thread_counts() -> None:
    native = ('from evaluator.native import load_c\nSOURCE = r"""\n#define BLOCK 4096\nvoid f(float* x) {}\n"""\n'
              'lib = load_c("f", SOURCE, functions=["f"])\n')
    [block] = find_tunables(native)
    assert block.choices == (2048, 8192)
    cuda = native.replace("void f", "__global__ void f")  # a CUDA source: a block is a thread block again
    assert find_tunables(cuda)[0].choices == ()


def test_bounds_and_non_powers_of_two() -> None:
    big = VECTOR_ADD.replace("BLOCK_SIZE=128, num_warps=4", "BLOCK_SIZE=8192, num_warps=16")
    assert {note for _, note in neighbours(big, max_changes=1)} == {"BLOCK_SIZE 8192->4096", "num_warps 16->8"}
    odd = VECTOR_ADD.replace("BLOCK_SIZE=128, num_warps=4", "BLOCK_SIZE=96, num_warps=3")
    assert {note for _, note in neighbours(odd, max_changes=1)} == {
        "BLOCK_SIZE 96->72", "BLOCK_SIZE 96->120", "num_warps 3->2", "num_warps 3->4"
    }


def test_neighbours_are_distinct_and_differ_from_the_source() -> None:
    for source in (VECTOR_ADD, MODULE_CONSTANTS, CUDA, SOFTMAX):
        sources = [src for src, _ in neighbours(source)]
        assert sources and len(sources) == len(set(sources))
        assert source not in sources


def test_no_tunables_and_bad_source_give_nothing() -> None:
    assert neighbours(NO_TUNABLES) == [] and describe_tunables(NO_TUNABLES) == {}
    bad = "def forward(:\n    kernel[grid](x, BLOCK_SIZE=128)\n"
    assert neighbours(bad) == [] and describe_tunables(bad) == {}
    tuner = TuneProposer(seed=0)
    for source in (NO_TUNABLES, bad):
        assert asyncio.run(tuner.propose(None, [Scored(Candidate.from_source(source))], [], 5)) == []


def test_propose_returns_fresh_tune_candidates() -> None:
    parent = Candidate.from_source(VECTOR_ADD, origin="seed")
    out = asyncio.run(TuneProposer(seed=1).propose(object(), [Scored(parent)], [], 5))
    assert len(out) == 5
    assert len({c.digest for c in out}) == 5 and parent.digest not in {c.digest for c in out}
    expected = dict((src, note) for src, note in neighbours(VECTOR_ADD))
    for child in out:
        assert child.origin == "tune" and child.parents == (parent.digest,)
        assert expected[child.source] == child.note


def test_propose_is_seeded_and_exhausts_without_repeats() -> None:
    parent = Candidate.from_source(VECTOR_ADD)
    first = asyncio.run(TuneProposer(seed=7).propose(None, [Scored(parent)], [], 4))
    again = asyncio.run(TuneProposer(seed=7).propose(None, [Scored(parent)], [], 4))
    assert [c.digest for c in first] == [c.digest for c in again]
    everything = asyncio.run(TuneProposer(seed=7).propose(None, [Scored(parent)], [], 100))
    assert len(everything) == len(neighbours(VECTOR_ADD)) == len({c.digest for c in everything})


def test_propose_never_returns_a_parent_or_inspiration_and_prefers_the_first_parent() -> None:
    first = Candidate.from_source(VECTOR_ADD)
    second = Candidate.from_source(VECTOR_ADD.replace("BLOCK_SIZE=128", "BLOCK_SIZE=256"))  # a neighbour of first
    inspiration = Candidate.from_source(VECTOR_ADD.replace("num_warps=4", "num_warps=8"))
    out = asyncio.run(TuneProposer(seed=3).propose(None, [Scored(first), Scored(second)], [Scored(inspiration)], 200))
    digests = [c.digest for c in out]
    assert len(digests) == len(set(digests))
    assert not {first.digest, second.digest, inspiration.digest} & set(digests)
    assert {c.parents for c in out} == {(first.digest,), (second.digest,)}
    few = asyncio.run(TuneProposer(seed=3).propose(None, [Scored(first), Scored(second)], [], 6))
    assert sum(c.parents == (first.digest,) for c in few) > sum(c.parents == (second.digest,) for c in few)


RUNNER = textwrap.dedent('''\
    import importlib.util, json, os, sys
    os.environ["TRITON_INTERPRET"] = "1"
    import torch

    ok = {}
    for i, path in enumerate(sys.argv[1:]):
        spec = importlib.util.spec_from_file_location(f"candidate_{i}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        x, y = torch.randn(1000), torch.randn(1000)
        ok[path] = bool(torch.allclose(module.ModelNew()(x, y), x + y))
    print(json.dumps(ok))
''')


def test_tuned_triton_neighbours_run_correctly_under_the_interpreter(tmp_path: Path) -> None:
    sources = {f"{i}_{note}": src for i, (src, note) in enumerate(
        neighbours(VECTOR_ADD, max_changes=1) + neighbours(VECTOR_ADD_FIXED_GRID, max_changes=1))}
    # Control: changing the launch literal without the grid's must be caught by the same check.
    sources["broken"] = VECTOR_ADD_FIXED_GRID.replace("BLOCK_SIZE=128", "BLOCK_SIZE=64")
    paths = {}
    for key, src in sources.items():
        path = tmp_path / f"cand_{len(paths)}.py"
        path.write_text(src, encoding="utf-8")
        paths[str(path)] = key
    (tmp_path / "runner.py").write_text(RUNNER, encoding="utf-8")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, str(tmp_path / "runner.py"), *paths], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ok = {paths[p]: v for p, v in json.loads(proc.stdout.strip().splitlines()[-1]).items()}
    assert ok.pop("broken") is False
    assert len(ok) == 8 and all(ok.values()), ok
