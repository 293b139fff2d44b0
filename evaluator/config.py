"""How one evaluation is run: device, limits, trial counts and the timing protocol's budgets."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class EvalConfig:
    device: str = "auto"                  # auto | cpu | cuda
    allow_torch: bool = False             # admit candidates that launch no custom kernel ("anything goes" track)
    kernels_only: bool = False            # the strict rule: no PyTorch compute at the output's scale (torch_rule.py)
    compile_timeout_s: float = 180.0      # importing the candidate and building its kernels
    run_timeout_s: float = 120.0          # each later phase (correctness, timing) separately
    memory_limit_bytes: int = 16 * 2**30  # address-space limit of the candidate process (host memory)
    gpu_memory_fraction: float = 0.45     # the candidate's share of the GPU's memory (the reference keeps the rest)
    trials: int = 3                       # correctness trials with fresh seeds, per shape variant
    warmup_ms: float = 25.0
    max_timing_s: float = 2.0             # time cap for each side's timed repetitions
    min_reps: int = 10                     # timed calls per side at least, whatever the time cap (measure.py)
    max_reps: int = 1000
    target_rse: float = 0.01              # stop repeating once the median's relative standard error is below this
    suspicious_speedup: float = 10.0      # above this, re-measure from the driver's own clock
    # Timed calls whose outputs the driver reads and the reference recomputes: a uniform sample of all of them
    # (`output_slot.Reservoir`), which misses every call of a candidate wrong in half of them with odds of 2**-6.
    timing_recheck_reps: int = 6
    compile_baseline: bool = False        # also time torch.compile(Model) as a second baseline
    energy_loop_s: float = 1.0            # GPU: each side's back-to-back loop that energy is metered over; 0: none
    profile: bool = True                  # profiler feedback for the agents
    sandbox: str = "auto"                 # auto | bwrap | process
