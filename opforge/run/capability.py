"""What a job needs of a worker's machine, and what this machine has: a worker claims only the jobs it can run.

- `cpp` (native C/C++ CPU kernels) is a `cpu` job: every machine has a CPU, but native kernels timed on a GPU
  worker's host would hold that GPU idle for a CPU's work, so GPU workers leave them to CPU-only ones;
- `cuda` needs a GPU;
- `triton` needs a GPU when the run was planned on a machine with one (`--backend auto` resolved there) or asked for
  the `cuda` device; Triton on the CPU (`--device cpu`) is a `cpu` job; Triton planned without a GPU and without a
  device is `any`: the checking it does under the interpreter runs anywhere.
"""

from __future__ import annotations

from opforge.run.config import RunConfig


def job_requirement(config: RunConfig, cuda_available: bool) -> str:
    """`cpu`, `gpu` or `any`: what a worker's machine must have to run this run's job."""
    if config.backend == "cpp":
        return "cpu"
    if config.backend == "cuda" or config.eval.device == "cuda":
        return "gpu"
    if config.eval.device == "cpu":
        return "cpu"
    return "gpu" if cuda_available else "any"


def machine_has(cuda_available: bool) -> tuple[str, ...]:
    """What this machine offers: a GPU worker runs GPU jobs (and `any`), a CPU-only one CPU jobs (and `any`)."""
    return ("gpu",) if cuda_available else ("cpu",)

