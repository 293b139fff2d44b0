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

from agents.prompting import TEMPLATES, DeviceFacts, PromptError, messages, render
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
