"""The prompt templates render to fixed text (golden files) and fail loudly on a missing variable.

Each template is rendered with a fixed, realistic context (the tiny softmax task and its seed as the parent) and must
equal `tests/golden/prompts/<name>.txt` byte for byte. After an intended change to a template, regenerate the goldens
and review the diff:

    OPFORGE_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_prompts.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agents.cpu_facts import CpuFacts
from agents.prompting import TEMPLATES, DeviceFacts, PromptError, messages, render, template_for
from evaluator.build.native_spec import ALLOWED_FLAGS
from evaluator.result import Timing

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden" / "prompts"
TASK_SOURCE = (ROOT / "benchmarks" / "tiny" / "softmax.py").read_text()
SEED_SOURCE = (ROOT / "benchmarks" / "tiny" / "softmax.seed.py").read_text()
H100 = DeviceFacts(name="NVIDIA H100 80GB HBM3", sm_count=132, memory_bandwidth_gbps=3350.0, peak_tflops=66.9)
PROFILE = {
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": 41.27,
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": 18.5,
    "launch__registers_per_thread": 32.0,
}
PLAN = (
    "Bottleneck: the row is read from DRAM three times. Method: single-pass online softmax. "
    "Plan: keep a running max and rescaled running sum in one loop, then one write pass."
)
INSPIRATION = SEED_SOURCE.replace("BLOCK_SIZE=1024, num_warps=4", "BLOCK_SIZE=2048, num_warps=8")

# The native (cpp) prompts: the relu test task, an honest OpenMP kernel as the parent, a CPU with measured figures.
RELU_SOURCE = (ROOT / "tests" / "tasks" / "relu.py").read_text()
NATIVE_SOURCE = (ROOT / "tests" / "honest" / "relu_openmp_c.py").read_text()
NATIVE_INSPIRATION = NATIVE_SOURCE.replace("#define BLOCK 4096", "#define BLOCK 16384")
EPYC = CpuFacts(name="AMD EPYC 9654 96-Core Processor", cores=8, simd="AVX-512 (512-bit, 16 floats)",
                flags=("fma", "avx2", "avx512f", "avx512bw"), l1d_kib=32, l2_kib=1024, l3_kib=32768,
                copy_bandwidth_gbps=41.5, peak_gflops=1210.0)
CPU_PROFILE = {
    "aten::empty_like self_cpu_us": 3.1,
    "launches.cpp": 1.0,
    "launches.cpp:relu": 1.0,
    "perf.cycles": 2.1e6,
    "perf.instructions": 1.3e6,
    "perf.LLC-load-misses": 5.2e4,
}
NATIVE_BROKEN = NATIVE_SOURCE.replace("out[i] = x[i]", "out[i] = x[i", 1)

CONTEXTS: dict[str, dict] = {
    "coder_generate": dict(task_name="tiny/softmax", task_source=TASK_SOURCE, backend="triton", device=H100),
    "coder_refine": dict(
        task_name="tiny/softmax", task_source=TASK_SOURCE, backend="triton", device=H100, parent_source=SEED_SOURCE,
        evaluation=dict(
            status="ok", reason="correct on all shapes", speedup=0.83,
            candidate_ms=Timing(median_ms=0.0123, iqr_ms=0.0004, reps=200),
            reference_ms=Timing(median_ms=0.0102, iqr_ms=0.0003, reps=200),
            max_abs_error=2.4e-07, profile=PROFILE,
        ),
        plan=PLAN,
    ),
    "coder_crossover": dict(
        task_name="tiny/softmax", task_source=TASK_SOURCE, backend="triton", device=H100,
        parent_source=SEED_SOURCE, parent_speedup=0.83,
        inspirations=[dict(source=INSPIRATION, speedup=1.12), dict(source=SEED_SOURCE, speedup=None)],
    ),
    "judge_repair": dict(
        task_source=TASK_SOURCE, candidate_source=SEED_SOURCE.replace("axis=0)", "axis=1)", 1),
        status="compile_error", reason="Triton failed to compile softmax_kernel.", max_abs_error=None,
        log_tail="triton.compiler.errors.CompilationError: at 17:14:\n    row_max = tl.max(running_max, axis=1)\n"
        "ValueError: invalid axis 1. Expected 0 <= axis < 1\n",
    ),
    "judge_optimise": dict(
        task_source=TASK_SOURCE, candidate_source=SEED_SOURCE, device=H100,
        candidate_ms=Timing(median_ms=0.0123, iqr_ms=0.0004, reps=200),
        reference_ms=Timing(median_ms=0.0102, iqr_ms=0.0003, reps=200), speedup=0.83, profile=PROFILE,
    ),
    "judge_review": dict(task_source=TASK_SOURCE, candidate_source=SEED_SOURCE),
    "coder_translate": dict(
        task_name="test/relu", task_source=RELU_SOURCE, backend="triton", device=H100, source_kernel=NATIVE_SOURCE,
        source_backend="cpp", source_speedup=2.4, source_device="AMD EPYC 9654 96-Core Processor",
    ),
    "native_coder_generate": dict(task_name="test/relu", task_source=RELU_SOURCE, device=EPYC),
    "native_coder_refine": dict(
        task_name="test/relu", task_source=RELU_SOURCE, device=EPYC, parent_source=NATIVE_SOURCE,
        evaluation=dict(
            status="ok", reason="correct on every trial", speedup=1.31,
            candidate_ms=Timing(median_ms=0.84, iqr_ms=0.02, reps=120),
            reference_ms=Timing(median_ms=1.1, iqr_ms=0.03, reps=120),
            max_abs_error=0.0, profile=CPU_PROFILE,
        ),
        plan="Bottleneck: one pass at 60% of copy bandwidth. Method: streaming stores. Plan: _mm512_stream_ps.",
    ),
    "native_coder_crossover": dict(
        task_name="test/relu", task_source=RELU_SOURCE, device=EPYC, parent_source=NATIVE_SOURCE,
        parent_speedup=1.31,
        inspirations=[dict(source=NATIVE_INSPIRATION, speedup=1.4), dict(source=SEED_SOURCE, speedup=None,
                                                                         task="tiny/softmax")],
    ),
    "native_coder_translate": dict(
        task_name="tiny/softmax", task_source=TASK_SOURCE, device=EPYC, source_kernel=SEED_SOURCE,
        source_backend="triton", source_speedup=1.12, source_device="NVIDIA H100 80GB HBM3",
    ),
    "native_judge_repair": dict(
        task_source=RELU_SOURCE, candidate_source=NATIVE_BROKEN, status="compile_error",
        reason="the native build of relu_omp failed: expected ']' before ';' token", max_abs_error=None,
        log_tail="relu_omp.c:7:77: error: expected ']' before ';' token\n",
    ),
    "native_judge_optimise": dict(
        task_source=RELU_SOURCE, candidate_source=NATIVE_SOURCE, device=EPYC,
        candidate_ms=Timing(median_ms=0.84, iqr_ms=0.02, reps=120),
        reference_ms=Timing(median_ms=1.1, iqr_ms=0.03, reps=120),
        compiled_ms=Timing(median_ms=0.95, iqr_ms=0.02, reps=120), speedup=1.31, roofline_fraction=61.7,
        profile=CPU_PROFILE,
    ),
    "native_judge_review": dict(task_source=RELU_SOURCE, candidate_source=NATIVE_SOURCE),
}


def test_every_template_has_a_golden_context():
    assert set(CONTEXTS) == set(TEMPLATES)


@pytest.mark.parametrize("name", TEMPLATES)
def test_template_matches_golden(name):
    text = render(name, **CONTEXTS[name])
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("OPFORGE_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} is missing; run with OPFORGE_UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(), f"{name} differs from {path}; if intended, regenerate with OPFORGE_UPDATE_GOLDEN=1"


@pytest.mark.parametrize("name", TEMPLATES)
def test_missing_variable_raises(name):
    context = dict(CONTEXTS[name])
    missing = sorted(context)[0]
    del context[missing]
    with pytest.raises(PromptError, match=name):
        render(name, **context)


def test_missing_nested_field_raises():
    context = dict(CONTEXTS["coder_refine"])
    context["evaluation"] = {k: v for k, v in context["evaluation"].items() if k != "max_abs_error"}
    with pytest.raises(PromptError, match="max_abs_error"):
        render("coder_refine", **context)


def test_unknown_device_facts_render_as_unknown():
    text = render("coder_generate", **{**CONTEXTS["coder_generate"], "device": DeviceFacts(name="Some GPU")})
    assert "- name: Some GPU" in text
    assert "- streaming multiprocessors: unknown" in text
    assert "- memory bandwidth: unknown" in text
    assert "- peak throughput: unknown" in text
    assert "None" not in text


def test_known_device_facts_render_with_units():
    text = render("coder_generate", **CONTEXTS["coder_generate"])
    assert "- streaming multiprocessors: 132" in text
    assert "- memory bandwidth: 3350 GB/s" in text
    assert "- peak throughput: 66.9 TFLOP/s" in text


def test_backends_get_their_own_rules():
    triton = render("coder_generate", **CONTEXTS["coder_generate"])
    cuda = render("coder_generate", **{**CONTEXTS["coder_generate"], "backend": "cuda"})
    assert 'input_precision="ieee"' in triton and "@triton.jit" in triton and "load_inline" not in triton
    assert "load_inline" in cuda and "@triton.jit" not in cuda
    with pytest.raises(PromptError, match="unknown backend"):
        render("coder_generate", **{**CONTEXTS["coder_generate"], "backend": "metal"})


def test_crossover_needs_an_inspiration():
    with pytest.raises(PromptError, match="inspiration"):
        render("coder_crossover", **{**CONTEXTS["coder_crossover"], "inspirations": []})


def test_unknown_template_is_refused():
    with pytest.raises(PromptError, match="unknown prompt template"):
        render("coder_telepathy")


def test_messages_pairs_system_and_user():
    assert messages("sys", "usr") == [{"role": "system", "content": "sys"}, {"role": "user", "content": "usr"}]


def test_templates_are_chosen_by_backend():
    assert template_for("coder_refine", "cpp") == "native_coder_refine"
    assert template_for("judge_optimise", "triton") == "judge_optimise"
    assert template_for("coder_generate", "cuda") == "coder_generate"
    with pytest.raises(PromptError, match="unknown backend"):
        template_for("coder_generate", "metal")
    native = render("native_coder_generate", **CONTEXTS["native_coder_generate"])
    assert "load_c(" in native and "@triton.jit" not in native and "load_inline" not in native


def test_native_prompts_list_exactly_the_evaluators_flags():
    """The flag list the coder reads is the one the build stage enforces: a drift between them fails here."""
    for name in ("native_coder_generate", "native_judge_repair"):
        assert ALLOWED_FLAGS in render(name, **CONTEXTS[name])


def test_native_prompts_tell_the_machine_and_what_is_refused():
    text = render("native_coder_generate", **CONTEXTS["native_coder_generate"])
    assert "- cores this process may use (OpenMP gets as many threads as PyTorch): 8" in text
    assert "- widest SIMD: AVX-512 (512-bit, 16 floats) (flags: fma, avx2, avx512f, avx512bw)" in text
    assert "- caches: L1d 32 KiB, L2 1024 KiB, L3 32768 KiB" in text
    assert "- measured copy bandwidth: 41.5 GB/s" in text and "- measured peak FP32 throughput: 1210 GFLOP/s" in text
    assert "may not call ATen" in text and "outlives the call" in text and "No state kept across calls" in text
    unknown = render("native_coder_generate", **{**CONTEXTS["native_coder_generate"], "device": CpuFacts(name="CPU")})
    assert "- measured copy bandwidth: unknown" in unknown and "- widest SIMD: unknown" in unknown
    assert "None" not in unknown


def test_native_judge_reads_the_cpu_profile_and_perf_counters_apart():
    text = render("native_judge_optimise", **CONTEXTS["native_judge_optimise"])
    assert "fraction of the roofline bound (least bytes at the measured bandwidth, least FLOPs at the measured " \
           "peak): 62%" in text
    assert "- torch.compile time (Inductor's C++ backend): 0.9500 ms median" in text
    head, counters = text.split("Hardware counters (`perf stat`):")
    assert "| launches.cpp:relu | 1 |" in head and "perf." not in head
    assert "| LLC-load-misses | 5.2e+04 |" in counters
    no_perf = {k: v for k, v in CPU_PROFILE.items() if not k.startswith("perf.")}
    text = render("native_judge_optimise", **{**CONTEXTS["native_judge_optimise"], "profile": no_perf,
                                              "roofline_fraction": None, "compiled_ms": None})
    assert "(no hardware counters: `perf` is not available here)" in text
    assert "peak): unknown" in text and "(Inductor's C++ backend): unknown" in text
