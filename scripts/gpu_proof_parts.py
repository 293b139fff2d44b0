"""Issue 8's parts of scripts/gpu_proof.py: env, timer, noise, memory, energy, prompt, loop and sol (issue 15's
parts are in gpu_proof_claims.py). Each takes the run's `Context` (gpu_proof.py) and returns its figures.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import seed_for, suite_tasks
from evaluator import Candidate, load_candidate, load_task
from gpu_proof_cases import (CUDA_TASK, ENERGY_CASE, HONEST_CUDA, IDLE_TARGET, NOISE_CV_TARGET, NOISE_MIN_MS,
                             TIMER_CASES, TIMER_TOLERANCE, Direct, _fmt, _mib, _nvidia_smi, case_task, copy_gbps,
                             evaluate, median_ms, ncu_median_ms, ratio, within)

if TYPE_CHECKING:
    from gpu_proof import Context


def part_env(ctx: "Context") -> dict[str, Any]:
    import torch
    import triton

    out: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                           "triton": triton.__version__, "host": platform.node(), "cpus": os.cpu_count()}
    n_bytes = (1 << 30) if ctx.device == "cuda" else (1 << 24)
    out["copy_gbps"] = copy_gbps(n_bytes, ctx.device)
    if ctx.device == "cuda":
        props = torch.cuda.get_device_properties(0)
        out.update(gpu=props.name, sms=props.multi_processor_count, memory_gib=props.total_memory / 2**30,
                   cuda=torch.version.cuda, driver=_nvidia_smi("driver_version"))
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        out["bf16_tflops"] = 2 * 8192**3 / (median_ms(lambda: a @ b, "cuda") * 1e-3) / 1e12
    ctx.env = out
    ctx.table("env", ["figure", "value"], [[k, _fmt(v)] for k, v in out.items()])
    return out


def part_timer(ctx: "Context") -> list[dict[str, Any]]:
    rows = []
    for case in TIMER_CASES:
        task, seed = case_task(case, ctx.device)
        result = evaluate(ctx.evaluator, task, seed, ctx.cfg(profile=False))
        with tempfile.TemporaryDirectory() as tmp:
            direct = Direct(task, seed, ctx.device, Path(tmp))
            bench_cand = median_ms(direct.call("candidate"), ctx.device)
            bench_ref = median_ms(direct.call("reference"), ctx.device)
            ncu = ncu_median_ms(task, seed, Path(tmp)) if ctx.device == "cuda" else None
        ours = result.candidate_ms.median_ms if result.candidate_ms else None
        ref = result.reference_ms.median_ms if result.reference_ms else None
        rows.append({"case": case.label(ctx.device), "opforge_ms": ours, "do_bench_ms": bench_cand, "ncu_ms": ncu,
                     "vs_do_bench": ratio(ours, bench_cand), "vs_ncu": ratio(ours, ncu),
                     "reference_opforge_ms": ref, "reference_do_bench_ms": bench_ref,
                     "reference_vs_do_bench": ratio(ref, bench_ref),
                     "ok": all(within(r, TIMER_TOLERANCE) is not False
                               for r in (ratio(ours, bench_cand), ratio(ours, ncu)))})
    ctx.table("timer", ["case", "opforge ms", "do_bench ms", "ncu ms", "opforge/do_bench", "opforge/ncu",
                        "reference opforge/do_bench", f"within {TIMER_TOLERANCE:.0%}"],
              [[r["case"], _fmt(r["opforge_ms"]), _fmt(r["do_bench_ms"]), _fmt(r["ncu_ms"]), _fmt(r["vs_do_bench"]),
                _fmt(r["vs_ncu"]), _fmt(r["reference_vs_do_bench"]), _fmt(r["ok"])] for r in rows])
    return rows


def coefficient_of_variation(xs: list[float]) -> float:
    return statistics.stdev(xs) / statistics.mean(xs) if len(xs) > 1 and statistics.mean(xs) > 0 else math.nan


def part_noise(ctx: "Context") -> list[dict[str, Any]]:
    rows = []
    for case in TIMER_CASES:
        task, seed = case_task(case, ctx.device)
        results = [evaluate(ctx.evaluator, task, seed, ctx.cfg(profile=False)) for _ in range(ctx.repeats)]
        medians = [r.candidate_ms.median_ms for r in results if r.candidate_ms is not None]
        cv = coefficient_of_variation(medians)
        applies = statistics.mean(medians) >= NOISE_MIN_MS
        rows.append({"case": case.label(ctx.device), "evaluations": len(medians), "mean_ms": statistics.mean(medians),
                     "cv": cv, "target_applies": applies, "ok": (cv < NOISE_CV_TARGET) if applies else None})
    ctx.table("noise", ["case", "evaluations", "mean of medians ms", "CV", f"CV < {NOISE_CV_TARGET:.0%} (>= 50 us)"],
              [[r["case"], r["evaluations"], _fmt(r["mean_ms"]), _fmt(r["cv"]), _fmt(r["ok"])] for r in rows])
    return rows


def part_memory(ctx: "Context") -> list[dict[str, Any]]:
    import torch

    rows = []
    for case in TIMER_CASES[1:]:
        task, seed = case_task(case, ctx.device)
        result = evaluate(ctx.evaluator, task, seed, ctx.cfg(profile=False))
        plain = None
        if ctx.device == "cuda":
            with tempfile.TemporaryDirectory() as tmp:
                direct = Direct(task, seed, "cuda", Path(tmp))
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                with torch.no_grad():
                    direct.call("reference")()
                torch.cuda.synchronize()
                plain = int(torch.cuda.max_memory_allocated() - base)
                del direct
                torch.cuda.empty_cache()
        rows.append({"case": case.label(ctx.device), "opforge_reference_peak_bytes": result.reference_peak_memory_bytes,
                     "plain_reference_peak_bytes": plain, "candidate_peak_bytes": result.peak_memory_bytes,
                     "ratio": ratio(result.reference_peak_memory_bytes, plain)})
    ctx.table("memory", ["case", "opforge reference peak MiB", "plain max_memory_allocated MiB", "ratio",
                         "candidate peak MiB"],
              [[r["case"], _mib(r["opforge_reference_peak_bytes"]), _mib(r["plain_reference_peak_bytes"]),
                _fmt(r["ratio"]), _mib(r["candidate_peak_bytes"])] for r in rows])
    return rows


class PowerSampler:
    """NVML power (W) sampled every `interval_s` in a thread, and the GPU's utilisation (%)."""

    def __init__(self, interval_s: float = 0.02) -> None:
        import pynvml  # nvidia-ml-py
        pynvml.nvmlInit()
        self._nvml, self._handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
        self.interval_s, self.power_w, self.util_pct = interval_s, [], []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def energy_mj(self) -> int:
        return int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.power_w.append(self._nvml.nvmlDeviceGetPowerUsage(self._handle) / 1e3)
            self.util_pct.append(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu)
            time.sleep(self.interval_s)

    def __enter__(self) -> "PowerSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def part_energy(ctx: "Context") -> dict[str, Any]:
    import torch

    task, seed = case_task(ENERGY_CASE, ctx.device)
    result = evaluate(ctx.evaluator, task, seed, ctx.cfg(profile=False, max_timing_s=5.0))
    out: dict[str, Any] = {"case": ENERGY_CASE.label(ctx.device), "opforge_energy_j": result.energy_j,
                           "opforge_power_w": result.power_w,
                           "opforge_ms": result.candidate_ms.median_ms if result.candidate_ms else None}
    if ctx.device == "cuda":
        with tempfile.TemporaryDirectory() as tmp:
            fn = Direct(task, seed, "cuda", Path(tmp)).call("candidate")
            for _ in range(5):
                fn()
            torch.cuda.synchronize()
            calls = 0
            with PowerSampler() as sampler:
                i0, ti = sampler.energy_mj(), time.perf_counter()
                time.sleep(1.0)  # idle power, taken off as opforge's energy loop does (evaluator/measure/energy.py)
                idle_w = (sampler.energy_mj() - i0) / 1e3 / (time.perf_counter() - ti)
                e0, t0 = sampler.energy_mj(), time.perf_counter()
                while time.perf_counter() - t0 < 5.0:
                    fn()
                    calls += 1
                torch.cuda.synchronize()
                e1, wall = sampler.energy_mj(), time.perf_counter() - t0
        mean_w = statistics.mean(sampler.power_w)
        out.update(calls=calls, nvml_counter_j_per_call=(e1 - e0) / 1e3 / calls,
                   power_times_time_j_per_call=mean_w * wall / calls, mean_power_w=mean_w)
        out.update(idle_w=idle_w, nvml_above_idle_j_per_call=((e1 - e0) / 1e3 - idle_w * wall) / calls)
        out["ratio_above_idle"] = ratio(result.energy_j, out["nvml_above_idle_j_per_call"])
        out["ratio_counter"] = ratio(result.energy_j, out["nvml_counter_j_per_call"])
        out["ratio_power_x_time"] = ratio(result.energy_j, out["power_times_time_j_per_call"])
    ctx.table("energy", ["figure", "value"], [[k, _fmt(v)] for k, v in out.items()])
    return out


def part_prompt(ctx: "Context") -> dict[str, Any]:
    from agents.device_facts import local_device_facts
    from agents.prompting import render

    task, seed = case_task(TIMER_CASES[2], ctx.device)
    result = evaluate(ctx.evaluator, task, seed, ctx.cfg(profile=True))
    prompt = render("judge_optimise", task_source=task.source, candidate_source=seed.source,
                    device=local_device_facts(ctx.device), candidate_ms=result.candidate_ms,
                    reference_ms=result.reference_ms, speedup=result.speedup, profile=dict(result.profile or {}))
    (ctx.out / "judge_prompt.txt").write_text(prompt)
    ncu = sorted(k for k in (result.profile or {}) if k.startswith("ncu."))
    shown = [k for k in ncu if k in prompt]
    out = {"case": TIMER_CASES[2].label(ctx.device), "profile_metrics": len(result.profile or {}),
           "ncu_metrics": len(ncu), "ncu_metrics_in_prompt": len(shown), "prompt_file": "judge_prompt.txt"}
    ctx.table("prompt", ["figure", "value"], [[k, _fmt(v)] for k, v in out.items()])
    return out


def cuda_variants(count: int) -> list[Candidate]:
    """Distinct honest CUDA candidates (the block size varies and a comment makes every CUDA source new, so each
    one is really compiled): what the loop pays for CUDA."""
    source = HONEST_CUDA.read_text()
    out = []
    for i in range(count):
        threads = (128, 256, 512, 1024)[i % 4]
        text = source.replace("const int threads = 256;", f"const int threads = {threads};")
        text = text.replace("#include <cuda_runtime.h>", f"#include <cuda_runtime.h>\n// proof variant {i}", 1)
        out.append(Candidate.from_source(text, origin="tune", note=f"threads={threads} variant {i}"))
    return out


def part_loop(ctx: "Context") -> list[dict[str, Any]]:
    from bench_loop import InstantProposer

    from evaluator.driver.pool import LocalRunner
    from opforge.run.config import RunConfig
    from opforge.run.proposals import Proposing
    from opforge.run.search import Search, SearchSettings
    from opforge.run.start import Budget, start_run
    from store import get_store

    class Listed(InstantProposer):
        def __init__(self, ready: list[Candidate]) -> None:  # noqa: D107 - a fixed list instead of neighbours
            self._ready = ready

    case = TIMER_CASES[2]
    task, seed = case_task(case, ctx.device)
    plans = [("triton", case.label(ctx.device), task, seed, InstantProposer(seed, 4 * ctx.loop_evals), ctx.loop_evals)]
    if ctx.device == "cuda":
        cuda_task = load_task(CUDA_TASK)
        variants = cuda_variants(ctx.loop_evals_cuda + 1)
        plans.append(("cuda", "relu (tests/tasks) with honest CUDA variants", cuda_task, variants[0],
                      Listed(variants[1:]), ctx.loop_evals_cuda))
    rows = []
    for backend, label, loop_task, loop_seed, proposer, evals in plans:
        with tempfile.TemporaryDirectory() as tmp:
            store = get_store(f"sqlite:///{tmp}/loop.db")
            runner = LocalRunner(1, build_cache=str(Path(tmp) / "builds"))
            sampler = PowerSampler(0.1) if ctx.device == "cuda" else None
            t0 = time.monotonic()
            try:
                budget = Budget(evals)
                run = start_run(store, loop_task, loop_seed, RunConfig(), budget)
                if sampler:
                    sampler.__enter__()
                outcome = Search(store, run.id, loop_task, Proposing(proposer), runner,
                                 SearchSettings(ctx.cfg(profile=True), budget)).run()
            finally:
                if sampler:
                    sampler.__exit__()
                wall = time.monotonic() - t0
                runner.close()
                store.close()
        idle = 1 - statistics.mean(sampler.util_pct) / 100 if sampler and sampler.util_pct else None
        rows.append({"backend": backend, "task": label, "evaluations": outcome.done,
                     "by_status": dict(outcome.by_status), "wall_s": wall, "per_min": 60 * outcome.done / wall,
                     "gpu_idle_share": idle, "ok": None if idle is None else idle < IDLE_TARGET})
    ctx.table("loop", ["backend", "task", "evaluations", "verdicts", "wall s", "evals/min", "GPU idle share",
                       f"idle < {IDLE_TARGET:.0%}"],
              [[r["backend"], r["task"], r["evaluations"], _fmt(r["by_status"]), _fmt(r["wall_s"]), _fmt(r["per_min"]),
                _fmt(r["gpu_idle_share"]), _fmt(r["ok"])] for r in rows])
    return rows


def memory_bound(flops: float, min_bytes: int, env: dict[str, Any]) -> bool:
    """Below the device's ridge point (measured bf16 rate over measured copy bandwidth): bandwidth decides."""
    ridge = (env.get("bf16_tflops") or 0) * 1e12 / (env["copy_gbps"] * 1e9) if env.get("copy_gbps") else 0
    return min_bytes > 0 and (flops / min_bytes < ridge if ridge else flops == 0)


def part_sol(ctx: "Context") -> list[dict[str, Any]]:
    from agents.tuner import TuneProposer
    from evaluator.driver.pool import LocalRunner
    from evaluator.measure.task_work import task_work
    from opforge.run.config import RunConfig
    from opforge.run.proposals import Proposing
    from opforge.run.search import Search, SearchSettings
    from opforge.run.start import Budget, start_run
    from store import get_store

    env = ctx.env or part_env(ctx)
    paths = [p for p in suite_tasks(ctx.suite) if seed_for(p) is not None]
    if ctx.only:
        paths = [p for p in paths if p.stem in ctx.only]
    rows = []
    for path in paths:
        task, seed = load_task(path), load_candidate(seed_for(path), origin="seed")  # type: ignore[arg-type]
        work = task_work(task)
        with tempfile.TemporaryDirectory() as tmp:
            store = get_store(f"sqlite:///{tmp}/sol.db")
            runner = LocalRunner(1)
            try:
                budget = Budget(ctx.sol_budget)
                run = start_run(store, task, seed, RunConfig(), budget)
                outcome = Search(store, run.id, task, Proposing(TuneProposer(seed=1)), runner,
                                 SearchSettings(ctx.cfg(profile=False, compile_baseline=True), budget)).run()
            finally:
                runner.close()
                store.close()
        best = outcome.best.result if outcome.best is not None else None
        row: dict[str, Any] = {"task": path.stem, "evaluations": outcome.done, "by_status": dict(outcome.by_status)}
        if best is not None and best.ok and best.candidate_ms is not None:
            ms = best.candidate_ms.median_ms
            row.update(best_ms=ms, speedup_eager=best.speedup, speedup_compile=best.speedup_vs_compile)
            if work is not None:
                gbps = work.min_bytes / (ms * 1e-3) / 1e9
                row.update(flops=work.flops, min_bytes=work.min_bytes, gbps=gbps,
                           memory_bound=memory_bound(work.flops, work.min_bytes, env),
                           copy_fraction=gbps / env["copy_gbps"])
        rows.append(row)
        ctx.save()
    ctx.table("sol", ["task", "evaluations", "best ms", "x eager", "x torch.compile", "memory-bound", "GB/s",
                      "of copy bandwidth"],
              [[r["task"], r["evaluations"], _fmt(r.get("best_ms")), _fmt(r.get("speedup_eager")),
                _fmt(r.get("speedup_compile")), _fmt(r.get("memory_bound")), _fmt(r.get("gbps")),
                _fmt(r.get("copy_fraction"))] for r in rows])
    return rows


