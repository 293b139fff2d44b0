"""`load_c` outside the evaluator: prototypes, the flag allow-list, argument checks, real builds and the cache."""

from __future__ import annotations

import platform

import pytest
import torch

from evaluator import native
from evaluator.native import CompilerMissing, NativeBuildError, load_c
from evaluator.build.native_build import NativeCache, cache_root
from evaluator.build.native_spec import NativeSpec, PrototypeError

SCALE = r"""
#include <stdint.h>
/* y = a * x, and the sum of x as a double */
void scale(const float* restrict x, float* restrict y, float a, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = a * x[i];
}
double total(const float *x, long n) { double s = 0; for (long i = 0; i < n; ++i) s += x[i]; return s; }
"""


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPFORGE_NATIVE_BUILD_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(native, "_loaded", {})
    return tmp_path / "cache"


def test_prototypes_are_parsed_with_qualifiers_names_and_types():
    spec = NativeSpec.from_call("k", SCALE, ["scale", "total"])
    scale, total = spec.prototypes()
    assert [(a.name, a.ctype, a.pointer) for a in scale.args] == [
        ("x", "float", True), ("y", "float", True), ("a", "float", False), ("n", "int64_t", False)]
    assert scale.returns == "void" and total.returns == "double"
    assert [(a.ctype, a.pointer) for a in total.args] == [("float", True), ("long", False)]


def test_cxx_extern_c_block_and_unsigned_types_parse():
    src = 'extern "C" {\nunsigned long long\ncount(const uint8_t* m, size_t n, unsigned int k) { return n; }\n}'
    (proto,) = NativeSpec.from_call("k", src, ["count"], language="c++").prototypes()
    assert proto.returns == "unsigned long long"
    assert [a.ctype for a in proto.args] == ["uint8_t", "size_t", "unsigned int"]


@pytest.mark.parametrize("source, fn, words", [
    ("void f(float* x) {}", "g", "define no function g"),
    ("void f(float** x) {}", "f", "pointer to a pointer"),
    ("float* f(float* x) { return x; }", "f", "must return void or a scalar"),
    ("void f(struct thing t) {}", "f", "type load_c does not know"),
])
def test_unreadable_prototypes_are_one_sentence(source, fn, words):
    with pytest.raises(PrototypeError, match=words) as info:
        load_c("bad", source, [fn])
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("flag", ["-fplugin=evil.so", "-o/tmp/x", "-I/etc", "-Wl,-rpath,/tmp", "-B/tmp", "-DX=$(id)",
                                  "-include/etc/passwd", "@/tmp/args", "-mprefer-vector-width=1024",
                                  "-march=x86-64-v5", "-march=skylake", "-march=native -mno-avx",
                                  "-Wa,-adhln=/tmp/x", "-Wp,-MD,/tmp/x", "-Werror=format", "-specs=/tmp/x",
                                  "-fdump-tree-all", "-save-temps", "-g -o/tmp/x"])
def test_flags_outside_the_allow_list_are_refused(flag):
    with pytest.raises(ValueError, match="is not allowed") as info:
        load_c("k", SCALE, ["scale"], flags=["-O3", flag])
    assert "\n" not in str(info.value)


def test_flags_an_honest_kernel_brings_from_its_own_build_are_taken():
    """What C and C++ projects pass to their compilers beside the code-generation flags (threads, warnings, debug
    information, a standard, an undefined macro) builds and runs; ISA extensions are the kernel's to promise (taken,
    not built here: the CPU may lack them)."""
    lib = load_c("honest_flags", SCALE, ["scale"], flags=["-O3", "-pthread", "-fPIC", "-g", "-Wall", "-Wextra",
                                                          "-Wno-unused-parameter", "-fopenmp-simd", "-UNDEBUG",
                                                          "-std=gnu17", "-fvisibility=default"])
    x, out = torch.arange(64, dtype=torch.float32), torch.empty(64)
    lib.scale(x, out, 2.0, 64)
    assert torch.equal(out, x * 2.0)
    spec = NativeSpec.from_call("isa", SCALE, ["scale"], ["-mavx512vnni", "-mavx512bf16", "-mamx-tile", "-mbmi2",
                                                          "-msse4.2", "-std=c++20", "-fno-rtti"], language="c++")
    assert "-mamx-tile" in spec.flags


def test_a_kernel_may_ask_for_the_widest_vectors():
    """GCC vectorises with 256-bit vectors on most Intel CPUs unless told 512 (the fast draws: 1.5x on a Xeon)."""
    lib = load_c("wide", SCALE, ["scale"], flags=["-O3", "-march=native", "-mprefer-vector-width=512"])
    x, out = torch.arange(64, dtype=torch.float32), torch.empty(64)
    lib.scale(x, out, 2.0, 64)
    assert torch.equal(out, x * 2.0)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="an x86-64 micro-architecture level")
def test_a_kernel_may_be_built_for_a_portable_level_instead_of_this_cpu():
    """`-march=x86-64-v3` (AVX2 and FMA, no AVX-512) builds the code a CPU without AVX-512 would run, so a kernel's
    portable path can be checked and timed on a machine that has AVX-512 (scripts/bench_native.py --march)."""
    source = SCALE + "\nint avx512(void) {\n#ifdef __AVX512F__\n    return 1;\n#else\n    return 0;\n#endif\n}\n"
    lib = load_c("portable", source, ["scale", "avx512"], flags=["-O3", "-march=x86-64-v3"])
    x, out = torch.arange(64, dtype=torch.float32), torch.empty(64)
    lib.scale(x, out, 3.0, 64)
    assert torch.equal(out, x * 3.0)
    assert lib.avx512() == 0
    assert load_c("widest", source, ["scale", "avx512"], flags=["-O3", "-march=x86-64-v4"]).avx512() == 1


def test_bad_names_and_languages_are_refused():
    with pytest.raises(ValueError, match="C identifier"):
        load_c("../k", SCALE, ["scale"])
    with pytest.raises(ValueError, match="language"):
        load_c("k", SCALE, ["scale"], language="fortran")
    with pytest.raises(TypeError, match="functions must be"):
        load_c("k", SCALE, [3])


def test_a_real_kernel_gives_the_right_numbers():
    lib = load_c("scale", SCALE, ["scale", "total"], flags=["-O3", "-march=native"])
    x = torch.randn(1000)
    y = torch.empty_like(x)
    assert lib.scale(x, y, 2.5, x.numel()) is None
    torch.testing.assert_close(y, 2.5 * x)
    assert lib.total(x, x.numel()) == pytest.approx(x.double().sum().item(), rel=1e-9)


def test_openmp_and_cxx_kernels_build_and_run():
    src = r"""
    #include <cstdint>
    #include <vector>
    extern "C" void add(const double* a, const double* b, double* out, std::int64_t n) {
        std::vector<double> tmp(a, a + n);
        #pragma omp parallel for
        for (std::int64_t i = 0; i < n; ++i) out[i] = tmp[i] + b[i];
    }"""
    lib = load_c("addpp", src, ["add"], flags=["-O2", "-fopenmp"], language="c++")
    a, b = torch.randn(4096, dtype=torch.float64), torch.randn(4096, dtype=torch.float64)
    out = torch.empty_like(a)
    lib.add(a, b, out, a.numel())
    torch.testing.assert_close(out, a + b)


@pytest.mark.parametrize("call, error, words", [
    (lambda lib, x, y: lib.scale(x, y, 2.0), TypeError, r"takes 4 arguments \(float\* x, float\* y, float a, "
                                                         r"int64_t n\) but was given 3"),
    (lambda lib, x, y: lib.scale(x.double(), y, 2.0, 4), TypeError, "argument 1 'x' .* must be a torch.float32 tensor, "
                                                                    "not torch.float64"),
    (lambda lib, x, y: lib.scale(x, y.view(2, 2).t(), 2.0, 4), ValueError, "argument 2 'y' must be a contiguous"),
    (lambda lib, x, y: lib.scale(x, [1.0], 2.0, 4), TypeError, "argument 2 'y' .* must be a torch.Tensor, not list"),
    (lambda lib, x, y: lib.scale(x, y, 2.0, 4.5), TypeError, "argument 4 'n' .* must be an integer"),
    (lambda lib, x, y: lib.scale(x, y, torch.tensor(2.0), 4), TypeError, "argument 3 'a' .* must be a Python number"),
    (lambda lib, x, y: lib.scale(x, y, 2.0, 2 ** 70), ValueError, "out of range"),
    (lambda lib, x, y: lib.missing(x), AttributeError, "bound no function 'missing'"),
])
def test_argument_mismatches_are_one_sentence(call, error, words):
    lib = load_c("scale", SCALE, ["scale", "total"])
    x, y = torch.randn(4), torch.empty(4)
    with pytest.raises(error, match=words) as info:
        call(lib, x, y)
    assert "\n" not in str(info.value)


def test_meta_tensors_are_refused():
    lib = load_c("scale", SCALE, ["scale"])
    with pytest.raises(ValueError, match="must be a CPU tensor"):
        lib.scale(torch.empty(4, device="meta"), torch.empty(4), 1.0, 4)


def test_compile_errors_carry_the_log():
    with pytest.raises(NativeBuildError, match="do not compile") as info:
        load_c("broken", "void f(float* x) { x[0] = undefined_name; }", ["f"])
    assert "undefined_name" in str(info.value)


def test_without_a_compiler_load_c_names_the_compiler_and_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "no-compilers-here"))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("CXX", raising=False)
    with pytest.raises(CompilerMissing) as info:
        load_c("scale", SCALE, ["scale"])
    assert str(info.value) == ("load_c('scale'): no C compiler was found (looked for $CC, gcc and cc); install one "
                               "(e.g. `apt install gcc` or `dnf install gcc`) or set CC to a compiler's path")
    monkeypatch.setenv("CXX", str(tmp_path / "missing-g++"))  # named but absent: still none
    with pytest.raises(CompilerMissing, match=r"no C\+\+ compiler .*apt install g\+\+"):
        load_c("scale", 'extern "C" void f(float* x) { x[0] = 1; }', ["f"], language="c++")
    assert isinstance(info.value, NativeBuildError)  # callers catching build errors still catch it


def test_a_cache_hit_does_not_recompile(private_cache, monkeypatch):
    load_c("scale", SCALE, ["scale"], flags=["-O3"])
    cache = NativeCache(cache_root())
    assert [c["verdict"] for c in cache.compiles()] == ["built"]
    monkeypatch.setattr(native, "_loaded", {})  # a new process: only the disk cache is left
    lib = load_c("scale", SCALE, ["scale"], flags=["-O3"])
    assert len(cache.compiles()) == 1
    x, y = torch.ones(3), torch.empty(3)
    lib.scale(x, y, 3.0, 3)
    assert y.tolist() == [3.0, 3.0, 3.0]
    load_c("scale", SCALE, ["scale"], flags=["-O2"])  # other flags: another build
    assert len(cache.compiles()) == 2


def test_a_damaged_cache_entry_is_rebuilt(private_cache, monkeypatch):
    load_c("scale", SCALE, ["scale"])
    (so,) = private_cache.rglob("libscale.so")
    damaged = so.with_name("damaged")
    damaged.write_bytes(b"not a library")
    damaged.replace(so)  # not written in place: this process has the library mapped
    monkeypatch.setattr(native, "_loaded", {})
    lib = load_c("scale", SCALE, ["scale"])
    x, y = torch.ones(2), torch.empty(2)
    lib.scale(x, y, 2.0, 2)
    assert y.tolist() == [2.0, 2.0]
    assert len(NativeCache(cache_root()).compiles()) == 2


def test_served_builds_and_counted_launches(monkeypatch):
    """Inside the evaluator's worker: no compiler runs here, the library comes from `serve`'s build as bytes, and a
    call counts as one launch once it returned."""
    from evaluator.build.native_build import compile_library
    asked: list[str] = []

    def build(spec):
        asked.append(spec.name)
        import tempfile
        from pathlib import Path
        return compile_library(spec, Path(tempfile.mkdtemp())).read_bytes()

    launches: dict[str, int] = {}
    monkeypatch.setattr(native, "_served_build", None)
    monkeypatch.setattr(native, "_launches", None)
    native.serve(build, launches)
    lib = load_c("scale", SCALE, ["scale"])
    x, y = torch.ones(2), torch.empty(2)
    with pytest.raises(TypeError):
        lib.scale(x, y, 1.0)
    assert launches == {}
    lib.scale(x, y, 4.0, 2)
    assert asked == ["scale"] and launches == {"cpp:scale": 1} and y.tolist() == [4.0, 4.0]
    assert not NativeCache(cache_root()).compiles()


@pytest.mark.parametrize("flags", [["-O3", "-ffast-math"], ["-Ofast", "-fopenmp"]])
def test_a_fast_math_library_leaves_the_loading_process_floats_alone(tmp_path, flags):
    """gcc 12 links crtfastmath.o into a -ffast-math shared library; its constructor sets FTZ/DAZ for the whole
    process that loads it (a test runner, a user of an exported package). The library is still compiled with the
    flag, but loading it must not flush the process's subnormals to zero. Loaded in a child: a regression here
    would otherwise change every later float in this test process."""
    import subprocess
    import sys
    from pathlib import Path

    from evaluator.build.native_build import compile_library
    path = compile_library(NativeSpec.from_call("fm", SCALE, ["scale"], flags=flags), Path(tmp_path))
    probe = ("import ctypes, sys\nx = float(sys.argv[2])\nbefore = x * 1e-300\nctypes.CDLL(sys.argv[1])\n"
             "print(before != 0.0, x * 1e-300 != 0.0)")
    out = subprocess.run([sys.executable, "-c", probe, str(path), "1e-10"], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "True"], "loading the library flushed subnormals to zero"
