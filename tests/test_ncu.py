"""Nsight Compute feedback: parsing on any machine, a real profile where a GPU and ncu exist."""

from __future__ import annotations

import pytest
import torch

from evaluator.profile.ncu import NCU_METRICS, ncu_path, parse_ncu_csv


def _csv(rows: list[dict[str, str]]) -> str:
    head = ["ID", "Process ID", "Kernel Name", *NCU_METRICS]
    units = ["", "", "", *(["%"] * len(NCU_METRICS))]
    lines = ["==PROF== Connected to process 123", ",".join(f'"{h}"' for h in head),
             ",".join(f'"{u}"' for u in units)]
    for i, row in enumerate(rows):
        lines.append(",".join(f'"{v}"' for v in [str(i), "123", row.pop("name"), *(row.get(m, "") for m in NCU_METRICS)]))
    return "\n".join(lines)


def test_ncu_csv_is_aggregated_by_kernel_duration():
    text = _csv([
        {"name": "relu_kernel", "gpu__time_duration.sum": "3,000", "dram__throughput.avg.pct_of_peak_sustained_elapsed": "90",
         "launch__registers_per_thread": "32"},
        {"name": "tail_kernel", "gpu__time_duration.sum": "1000", "dram__throughput.avg.pct_of_peak_sustained_elapsed": "50",
         "launch__registers_per_thread": "64"},
    ])
    out = parse_ncu_csv(text)
    assert out["ncu.kernels"] == 2
    assert out["ncu.gpu__time_duration.sum"] == 4000
    assert out["ncu.dram__throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(80.0)
    assert out["ncu.launch__registers_per_thread"] == pytest.approx(40.0)


def test_ncu_output_without_kernels_gives_no_metrics():
    assert parse_ncu_csv("==PROF== No kernels were profiled.") == {}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or ncu_path() is None, reason="needs a CUDA device and ncu")
def test_real_kernel_gets_nsight_metrics():
    from pathlib import Path

    from evaluator import EvalConfig, load_candidate, load_task
    from evaluator import evaluate
    tiny = Path(__file__).resolve().parent.parent / "benchmarks" / "tiny"
    result = evaluate(load_task(tiny / "softmax.py"), load_candidate(tiny / "softmax.seed.py"),
                      EvalConfig(device="cuda", max_timing_s=0.5))
    assert result.ok, result.reason
    assert result.profile.get("ncu.kernels", 0) >= 1
    assert result.profile["ncu.gpu__time_duration.sum"] > 0
