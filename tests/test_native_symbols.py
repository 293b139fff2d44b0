"""A native library may call the C and C++ runtimes, never PyTorch below its dispatcher (issue 33, class 6): the
driver reads the undefined symbols of the library it built before any worker loads it."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

from evaluator import native
from evaluator.build import native_symbols

REPO = Path(__file__).resolve().parent.parent
SEEDS = sorted((REPO / "benchmarks").glob("*/*.cpp.py"))
pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


def _library(tmp_path: Path, source: str, name: str = "lib") -> bytes:
    c = tmp_path / f"{name}.c"
    c.write_text(source)
    out = tmp_path / f"lib{name}.so"
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", str(c), "-o", str(out)], check=True, capture_output=True)
    return out.read_bytes()


def test_every_built_in_seed_calls_only_the_runtimes(monkeypatch: pytest.MonkeyPatch):
    assert len(SEEDS) >= 40
    checked = 0
    for path in SEEDS:
        # A fresh table per seed: another test in this process may have loaded the same library already, and
        # load_c would then hand back the cached one without adding a key (CI ran this file after such a test).
        monkeypatch.setattr(native, "_loaded", {})
        spec = importlib.util.spec_from_file_location(f"seed_{path.stem.replace('.', '_')}", path)
        assert spec is not None and spec.loader is not None
        spec.loader.exec_module(importlib.util.module_from_spec(spec))  # builds with load_c, outside the evaluator
        for key in native._loaded:
            library = native._loaded[key]
            assert library._path is not None
            assert native_symbols.refusal(library._path.read_bytes(), key) is None, path.name
            checked += 1
    assert checked >= len(SEEDS)


def test_a_library_calling_the_blas_or_libtorch_is_refused(tmp_path: Path):
    data = _library(tmp_path, "extern void sgemm_(void); extern void _ZN2at6native4reluERKNS_6TensorE(void);\n"
                              "void k(void) { sgemm_(); _ZN2at6native4reluERKNS_6TensorE(); }\n")
    reason = native_symbols.refusal(data, "k")
    assert reason is not None and "no C or C++ runtime defines" in reason and "sgemm_" in reason


def test_a_weak_reference_counts_like_any_other(tmp_path: Path):
    data = _library(tmp_path, "extern void cblas_sgemm(void) __attribute__((weak));\n"
                              "void k(void) { if (cblas_sgemm) cblas_sgemm(); }\n")
    assert "cblas_sgemm" in (native_symbols.refusal(data, "k") or "")


def test_run_time_look_ups_are_refused_though_libc_defines_them(tmp_path: Path):
    data = _library(tmp_path, "#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <link.h>\n"
                              "static int cb(struct dl_phdr_info* i, size_t s, void* d) { return 0; }\n"
                              "void* k(void) { dl_iterate_phdr(cb, 0); return dlsym(RTLD_DEFAULT, \"x\"); }\n")
    reason = native_symbols.refusal(data, "k")
    assert reason is not None and "looks symbols up at run time" in reason


def test_libc_libm_and_openmp_are_allowed(tmp_path: Path):
    data = _library(tmp_path, "#include <math.h>\n#include <stdlib.h>\n#include <string.h>\n#include <pthread.h>\n"
                              "extern void GOMP_parallel(void (*)(void*), void*, unsigned, unsigned);\n"
                              "static void body(void* p) {}\n"
                              "float k(float* x, int n) { float* t = malloc(4 * n); memcpy(t, x, 4 * n);\n"
                              "  GOMP_parallel(body, 0, 0, 0); float s = expf(t[0]) + sqrtf(t[1]); free(t);\n"
                              "  pthread_t th; (void)th; return s; }\n")
    assert native_symbols.refusal(data, "k") is None


def test_bytes_that_are_not_a_library_are_refused():
    assert "cannot be checked" in (native_symbols.refusal(b"#!/bin/sh\necho hi\n", "k") or "")
    assert "cannot be checked" in (native_symbols.refusal(b"\x7fELF\x02\x01" + b"\0" * 10, "k") or "")


@pytest.mark.parametrize("symbol, words", [
    ("_ZN2at6native4reluERKNS_6TensorE", "below its dispatcher"),
    ("_ZN2at3cpu9clamp_minERKNS_6TensorERKN3c106ScalarE", "below its dispatcher"),
    ("cblas_sgemm", "below its dispatcher"),
    ("pthread_create", "starts threads of its own"),
    ("dlsym", "looks symbols up"),
])
def test_an_extension_below_the_dispatcher_or_on_threads_of_its_own_is_refused(tmp_path: Path, symbol: str,
                                                                                 words: str):
    data = _library(tmp_path, f"extern void {symbol}(void);\nvoid k(void) {{ {symbol}(); }}\n")
    assert words in (native_symbols.extension_refusal(data, "ext") or "")


def test_an_extension_calling_atens_operators_through_the_dispatcher_is_allowed(tmp_path: Path):
    ops = "_ZN2at4_ops4relu4callERKNS_6TensorE"  # at::_ops::relu::call: the dispatcher's entry, which the profiler sees
    data = _library(tmp_path, f"extern void {ops}(void);\nextern void GOMP_parallel(void);\n"
                              f"void k(void) {{ {ops}(); GOMP_parallel(); }}\n")
    assert native_symbols.extension_refusal(data, "ext") is None


@pytest.mark.parametrize("symbol", [
    "_ZN2at3cpu24is_avx512_vnni_supportedEv",  # at::cpu::is_avx512_vnni_supported(): a feature query
    "_ZN2at3cpu8init_amxEv",                    # at::cpu::init_amx(): the permission to use AMX's tiles
    "_ZN2at3cpu20get_cpu_capabilitiesEv",
    "_ZN2at3cpu14L1d_cache_sizeEv",
])
def test_an_extension_asking_aten_about_the_cpu_is_allowed(tmp_path: Path, symbol: str):
    data = _library(tmp_path, f"extern void {symbol}(void);\nvoid k(void) {{ {symbol}(); }}\n")
    assert native_symbols.extension_refusal(data, "ext") is None
    # the same namespace's compute is still refused, and so is a query's name on a function that takes arguments
    other = "_ZN2at3cpu24is_avx512_vnni_supportedERKNS_6TensorE"
    data = _library(tmp_path, f"extern void {other}(void);\nvoid k(void) {{ {other}(); }}\n")
    assert "below its dispatcher" in (native_symbols.extension_refusal(data, "ext") or "")


def test_thread_local_data_through_the_loader_is_allowed(tmp_path: Path):
    data = _library(tmp_path, "__thread int counter;\nint k(void) { return ++counter; }\n")  # __tls_get_addr
    assert native_symbols.refusal(data, "k") is None
