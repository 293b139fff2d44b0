"""The native seeds with an AVX-512 path keep a portable one for CPUs without it (AVX2, SSE, NEON): plain C with
omp simd loops, gcc's generic vectors and the plain-C exponential `exp_simd`. On a machine with AVX-512,
`-march=native` never builds that path, so here each seed's C source is built for x86-64-v3 (AVX2 and FMA, no
AVX-512) by the system compiler, bound in place of the seed's own library, and checked against the task on its small
shape variants (the GEMM kernels also at tile shapes the tuner can choose). `exp_simd` is checked against torch.exp
on its own."""

from __future__ import annotations

import importlib.util
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if importlib.util.find_spec("benchmarks") is None:  # plain `pytest` without the project installed
    sys.path.insert(0, str(ROOT))

from benchmarks import builtin_task, seed_path  # noqa: E402
from evaluator.native import NativeLibrary  # noqa: E402
from evaluator.build.native_build import commands  # noqa: E402
from evaluator.build.native_spec import NativeSpec  # noqa: E402

GEMM_FAMILY = [
    "matmul_bias", "linear_relu", "matmul_gelu", "matmul_residual", "mlp_gelu", "bmm", "conv1d", "conv2d_3x3",
    "causal_attention", "transformer_block",
]
# Memory-bound seeds with an AVX-512 fast path (vectorised exponentials, register-only pooling windows, non-temporal
# stores) and a portable path beside it.
MEMORY_BOUND = ["avg_pool2d", "max_pool2d", "col_sum", "cross_entropy", "kl_div", "log_softmax", "row_mean", "swiglu",
                "relu", "silu", "hardswish", "row_sum", "row_max", "softmax_backward", "add_mul", "batchnorm_inference",
                "group_norm", "leaky_relu_scale", "rmsnorm", "softmax", "softmax_temperature", "gelu_tanh", "mish"]
DEFAULT_TOL = 1e-4
# Seeds whose portable path computes exponentials with the plain-C `exp_simd` (vectorised by the compiler, not libm's).
SIMD_EXP_SEEDS = sorted(p.name.split(".")[0] for suite in ("tiny", "ops")
                        for p in (ROOT / "benchmarks" / suite).glob("*.cpp.py") if "exp_simd(" in p.read_text())
EXP_PROBE = r"""
void exp_probe(const float* restrict x, float* restrict out, int64_t n) {
    #pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = exp_simd(x[i]);
}
"""

pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64" or shutil.which("gcc") is None, reason="builds x86-64-v3 code with gcc"
)


def load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_without_avx512(seed: ModuleType, tmp_path: Path, extra: str = "",
                         functions: list[str] | None = None, level: str = "x86-64-v3") -> NativeLibrary:
    """The seed's SOURCE (and `extra` after it, then binding `functions` instead of the seed's) built for `level`
    (x86-64-v3: AVX2 and FMA; x86-64-v2: SSE4.2, where the GEMM seeds take their generic-vector kernel) with the
    seed's other flags by the build stage's own two command lines (so the library links as the product's do:
    never with the fast-math start file that would set FTZ/DAZ in this test process), bound with its prototypes."""
    call = re.search(r"flags=\[([^\]]*)\]", Path(seed.__file__).read_text())
    assert call, f"{seed.__file__}: no flags=[...] in its load_c call"
    flags = [f for f in re.findall(r'"([^"]+)"', call.group(1)) if f != "-march=native"]
    name = f"{Path(seed.__file__).name.split('.')[0]}_{level.replace('-', '_')}"
    spec = NativeSpec.from_call(name, seed.SOURCE + extra, functions or dir(seed.lib), flags, "c")
    (tmp_path / f"{name}.c").write_text(seed.SOURCE + extra)
    compile_line, link_line = commands(spec, "gcc", [f"{name}.c"], f"lib{name}.so")
    for line in ([*compile_line[:1], f"-march={level}", *compile_line[1:]], link_line):
        built = subprocess.run(line, cwd=tmp_path, capture_output=True, text=True)
        assert built.returncode == 0, built.stderr[-3000:]
    return NativeLibrary(spec.name, spec.prototypes(), tmp_path / f"lib{name}.so")


@pytest.mark.parametrize("name", GEMM_FAMILY)
def test_gemm_seed_is_correct_without_avx512(name, tmp_path, monkeypatch):
    seed = load_module(seed_path(name, "cpp"), f"portable_seed_{name}")
    assert "#ifdef __AVX512F__" in seed.SOURCE and "#else" in seed.SOURCE, f"{name}: no portable path to test"
    check_without_avx512(name, seed, tmp_path, monkeypatch)


@pytest.mark.parametrize("name", MEMORY_BOUND)
def test_memory_bound_seed_is_correct_without_avx512(name, tmp_path, monkeypatch):
    seed = load_module(seed_path(name, "cpp"), f"portable_seed_{name}")
    assert "#ifdef __AVX512F__" in seed.SOURCE, f"{name}: no AVX-512 path, so nothing else to test here"
    check_without_avx512(name, seed, tmp_path, monkeypatch)


@pytest.mark.parametrize("name", GEMM_FAMILY)
def test_gemm_seed_is_correct_on_its_generic_vector_path(name, tmp_path, monkeypatch):
    """Built for x86-64-v2 (SSE4.2, no AVX2 or FMA), the GEMM seeds take neither intrinsics kernel but the one in gcc's
    generic vectors that other CPUs (NEON among them) also build: it must still be right."""
    seed = load_module(seed_path(name, "cpp"), f"generic_seed_{name}")
    assert "defined(GEMM_AVX2)" in seed.SOURCE, f"{name}: no AVX2 kernel beside the generic one"
    check_without_avx512(name, seed, tmp_path, monkeypatch, level="x86-64-v2")


@pytest.mark.parametrize(("name", "level", "rows", "vectors"), [
    ("matmul_bias", "x86-64-v2", "UNROLL_M", "VEC_N"), ("conv2d_3x3", "x86-64-v2", "UNROLL_M", "VEC_N"),
    ("matmul_bias", "x86-64-v3", "UNROLL_M_AVX2", "VEC_N_AVX2"),
    ("conv2d_3x3", "x86-64-v3", "UNROLL_M_AVX2", "VEC_N_AVX2"),
])
def test_portable_micro_kernel_covers_tuned_tile_shapes(name, level, rows, vectors, tmp_path, monkeypatch):
    """The tuner moves each kernel's rows and vectors. The generic kernel's 4 x 16 blocks also cover a tile whose
    rows 4 does not divide (UNROLL_M 6: its second block repeats row 5 and stores two rows) and one vector of 16
    columns; the AVX2 kernel's blocks of MR rows x 16 columns cover the tuner's neighbours of its 6 x 16 (8 rows,
    which spill, and two blocks of 16 columns)."""
    seed = load_module(seed_path(name, "cpp"), f"tuned_seed_{name}_{rows}")
    tuned = {"UNROLL_M": ("6", "1"), "UNROLL_M_AVX2": ("8", "2")}[rows]
    source = re.sub(rf"#define {rows} \d+", f"#define {rows} {tuned[0]}", seed.SOURCE)
    source = re.sub(rf"#define {vectors} \d+", f"#define {vectors} {tuned[1]}", source)
    assert source.count(f"{rows} {tuned[0]}") == 1 and source.count(f"{vectors} {tuned[1]}") == 1, name
    monkeypatch.setattr(seed, "SOURCE", source)
    check_without_avx512(name, seed, tmp_path, monkeypatch, level=level)


def test_simd_exp_seeds_are_found():
    assert "softmax" in SIMD_EXP_SEEDS


@pytest.mark.parametrize("name", SIMD_EXP_SEEDS)
def test_portable_exponential_matches_torch_exp(name, tmp_path):
    """exp_simd against torch.exp in double precision: within 4e-7 relative (2 ulp) wherever expf's result is a
    normal float; beyond that range as expf (subnormal or 0 below, inf above, 0 for -inf, NaN for NaN)."""
    seed = load_module(seed_path(name, "cpp"), f"exp_seed_{name}")
    lib = build_without_avx512(seed, tmp_path, EXP_PROBE, ["exp_probe"])
    x = torch.cat([torch.linspace(-87.0, 88.0, 1_000_003), torch.randn(100_000), torch.tensor([0.0, -0.0, 1e-30])])
    out = torch.empty_like(x)
    lib.exp_probe(x, out, x.numel())
    relative = ((out.double() - x.double().exp()) / x.double().exp()).abs()
    assert relative.max() <= 4e-7, f"{name}: worst at x = {x[relative.argmax()]}: {relative.max():.3g}"
    edges = torch.tensor([-87.5, -88.0, -95.0, -103.0, -104.5, -1e30, -float("inf"), 88.8, 1e30, float("inf")])
    out = torch.empty_like(edges)
    lib.exp_probe(edges, out, edges.numel())
    assert torch.allclose(out, edges.exp(), rtol=1e-3, atol=2e-45), f"{name}: {out.tolist()}"
    nan = torch.tensor([float("nan")])
    lib.exp_probe(nan, out, 1)
    assert out[0].isnan(), f"{name}: exp(NaN) = {out[0]}"


# Seeds whose portable path takes 2^t in plain C: `exp2_simd` (callers clamp t to [-127, 128]) or `exp2neg` (t <= 0,
# it clamps below itself): one rounding and a degree-5 polynomial where exp_simd has a two-part ln 2 reduction.
EXP2_SEEDS = sorted((p.name.split(".")[0], fn) for suite in ("tiny", "ops")
                    for p in (ROOT / "benchmarks" / suite).glob("*.cpp.py")
                    for fn in ("exp2_simd", "exp2neg") if f"static inline float {fn}(" in p.read_text())


def test_exp2_seeds_are_found():
    assert ("gelu_tanh", "exp2_simd") in EXP2_SEEDS and ("softmax", "exp2neg") in EXP2_SEEDS


@pytest.mark.parametrize("name, fn", EXP2_SEEDS)
def test_portable_exp2_matches_torch_exp2(name, fn, tmp_path):
    """2^t against torch.exp2 in double precision over its domain: within 5e-7 relative where the result is a normal
    float; 0 at -127 and below (exp2neg); inf once t rounds to 128, from 127.5 (exp2_simd: where 2^t is still below
    FLT_MAX, but its callers divide by 1 + 2^t, so the quotient is 0 either way); NaN for NaN."""
    seed = load_module(seed_path(name, "cpp"), f"exp2_seed_{name}")
    probe = (f"\nvoid exp2_probe(const float* restrict x, float* restrict out, int64_t n) {{\n"
             f"    #pragma omp simd\n    for (int64_t i = 0; i < n; ++i) out[i] = {fn}(x[i]);\n}}\n")
    lib = build_without_avx512(seed, tmp_path, probe, ["exp2_probe"])
    top = 127.49 if fn == "exp2_simd" else 0.0
    t = torch.cat([torch.linspace(-126.0, top, 1_000_003), -torch.rand(100_000) * 20, torch.tensor([0.0, -0.0, -1e-30])])
    out = torch.empty_like(t)
    lib.exp2_probe(t, out, t.numel())
    relative = ((out.double() - t.double().exp2()) / t.double().exp2()).abs()
    assert relative.max() <= 5e-7, f"{name} {fn}: worst at t = {t[relative.argmax()]}: {relative.max():.3g}"
    edges = torch.tensor([-127.0, -float("inf")] if fn == "exp2neg" else [-127.0, 127.5])
    out = torch.empty_like(edges)
    lib.exp2_probe(edges, out, edges.numel())
    assert out[0] == 0.0 and (out[1] == 0.0 if fn == "exp2neg" else out[1] == float("inf")), f"{name} {fn}: {out}"
    nan = torch.tensor([float("nan")])
    lib.exp2_probe(nan, out, 1)
    assert out[0].isnan(), f"{name} {fn}: 2^NaN = {out[0]}"


def check_without_avx512(name: str, seed: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                         level: str = "x86-64-v3") -> None:
    """The seed built for `level` (x86-64-v3 unless said) matches the task on every small shape variant."""
    task = load_module(builtin_task(name), f"portable_task_{name}")
    monkeypatch.setattr(seed, "lib", build_without_avx512(seed, tmp_path, level=level))
    tol = getattr(task, "TOLERANCE", None) or {}
    tol = {"atol": tol.get("atol", DEFAULT_TOL), "rtol": tol.get("rtol", DEFAULT_TOL)}
    for overrides in task.SHAPES:
        for key, value in overrides.items():
            monkeypatch.setattr(task, key, value)
        torch.manual_seed(0)
        model = task.Model(*task.get_init_inputs())
        candidate = seed.ModelNew(*task.get_init_inputs())
        candidate.load_state_dict(model.state_dict())
        torch.manual_seed(1)
        inputs = task.get_inputs()
        with torch.no_grad():
            expected, got = model(*inputs), candidate(*inputs)
        pairs = zip(got, expected) if isinstance(expected, tuple) else [(got, expected)]  # row_max: values, indices
        for g, e in pairs:
            assert g.shape == e.shape and g.dtype == e.dtype, f"{name} {overrides}"
            assert torch.allclose(g, e, **tol), f"{name} {overrides}: max abs error {(g - e).abs().max()}"


def test_the_benches_build_seeds_for_another_level_where_they_ask_for_this_cpu(monkeypatch):
    """`--march x86-64-v3` of scripts/bench_native.py and bench_seed_ab.py: a seed's `-march=native` becomes the
    level, so on a CPU with AVX-512 the seed loaded afterwards runs its portable path (and is still correct)."""
    from benchmarks.seed_build import build_seeds_for
    from evaluator import native

    monkeypatch.setattr(native, "load_c", native.load_c)  # restored after the test
    probe = "int avx512(void) {\n#ifdef __AVX512F__\n    return 1;\n#else\n    return 0;\n#endif\n}\n"
    with pytest.raises(ValueError, match="not an x86-64 level"):
        build_seeds_for("skylake")
    build_seeds_for("x86-64-v3")
    assert native.load_c("probe", probe, ["avx512"], flags=["-O3", "-march=native"]).avx512() == 0
    task = load_module(builtin_task("relu"), "task_relu_v3")
    seed = load_module(seed_path(builtin_task("relu"), "cpp"), "seed_relu_v3")
    x = torch.randn(4099) - 0.25
    assert torch.equal(seed.ModelNew(*task.get_init_inputs())(x), torch.relu(x))
