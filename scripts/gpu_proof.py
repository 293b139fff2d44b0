"""Issue 8's measurements on a CUDA GPU in few calls: timer agreement, noise, loop throughput and GPU idle share,
energy, peak memory, the judge's prompt with Nsight Compute metrics, and speed of light over the built-in suite; and
issue 15's claims (scripts/gpu_proof_claims.py): the device warm-up, the timer's empty-call calibration and side-stream
check, the candidate's GPU memory cap, one timed phase per device.

On the lent GPU machine (`device` tool; see docs/PERFORMANCE-HISTORY.md, "GPU figures", for the recipe):

    python3 scripts/gpu_proof.py --out $OUT                          # every part, about 8 minutes on an H100
    python3 scripts/gpu_proof.py --parts sol --suite ops --out $OUT  # one part

Each part writes `gpu_proof.json` (every figure, merged with earlier parts' in the same --out) and `gpu_proof.md`
(the tables for docs/PERFORMANCE.md) under --out, and prints its table as it finishes. With `--device cpu` the same
code runs on a machine without a GPU, on small sizes, with host clocks in place of `do_bench` and no `ncu` or NVML
(the test suite runs it that way so that the script cannot rot between GPU sessions); those figures prove nothing
about a GPU.

The parts live by role beside this script: issue 8's in gpu_proof_parts.py, issue 15's in gpu_proof_claims.py, the
cases and measuring helpers they share in gpu_proof_cases.py; this file is the command line and the run's context.

Evaluations go through `LocalRunner` (one at a time: two evaluations sharing a GPU would time each other) because
the device image has no Ray and Ray's wheel is over what a call may carry.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_ARGS = sys.argv[1:]
if "--device=cpu" in _ARGS or any(a == "--device" and b == "cpu" for a, b in zip(_ARGS, _ARGS[1:])):
    # The in-process timings of Triton seeds then run interpreted, as the evaluator runs them; Triton reads this
    # when it is first imported, so before the imports below.
    os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from evaluator import EvalConfig  # noqa: E402
from evaluator.driver.evaluate import LocalEvaluator  # noqa: E402
from evaluator.worker.heap import keep_freed_memory  # noqa: E402

import gpu_proof_claims  # noqa: E402 - issue 15's parts (warmup, calibration, cap, lock), beside this script
from gpu_proof_cases import TIMER_CASES, Case, case_task, per_call_median_ms, sized_source  # noqa: E402, F401
from gpu_proof_parts import memory_bound  # noqa: E402, F401 - the helpers above are re-exported for the tests
from gpu_proof_parts import (part_energy, part_env, part_loop, part_memory, part_noise, part_prompt,  # noqa: E402
                             part_sol, part_timer)

PARTS = ("env", "warmup", "timer", "calibration", "noise", "memory", "cap", "energy", "lock", "prompt", "loop", "sol")

class Context:
    def __init__(self, args: argparse.Namespace) -> None:
        self.device, self.out, self.repeats = args.device, Path(args.out), args.repeats
        self.loop_evals, self.loop_evals_cuda, self.sol_budget = args.loop_evals, args.loop_evals_cuda, args.sol_budget
        self.suite, self.only = args.suite, set(filter(None, args.only.split(","))) if args.only else set()
        self.timing_s = args.timing_s
        self.out.mkdir(parents=True, exist_ok=True)
        self.json_path, self.md_path = self.out / "gpu_proof.json", self.out / "gpu_proof.md"
        self.data: dict[str, Any] = json.loads(self.json_path.read_text()) if self.json_path.exists() else {}
        self.env: dict[str, Any] | None = self.data.get("env")
        keep_freed_memory()  # as opforge's own driving processes do (evaluator/worker/heap.py)
        self.evaluator = LocalEvaluator(args.sandbox)
        self.data["runs"] = self.data.get("runs", []) + [{
            "command": " ".join(shlex.quote(a) for a in ["python3", *sys.argv]),
            "date": f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC", "device": self.device}]

    def cfg(self, profile: bool, **kw: Any) -> EvalConfig:
        return EvalConfig(device=self.device, profile=profile, max_timing_s=kw.pop("max_timing_s", self.timing_s),
                          **kw)

    def table(self, part: str, header: list[str], rows: list[list[Any]]) -> None:
        lines = [f"### {part}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
        text = "\n".join(lines) + "\n"
        print(text, flush=True)
        with self.md_path.open("a") as f:
            f.write(text + "\n")

    def save(self) -> None:
        self.json_path.write_text(json.dumps(self.data, indent=1, default=str))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, from: {', '.join(PARTS)}")
    parser.add_argument("--out", default=os.environ.get("OUT") or "gpu_proof_out",
                        help="folder for gpu_proof.json, gpu_proof.md and judge_prompt.txt (default $OUT)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--sandbox", choices=("auto", "bwrap", "process"), default="auto")
    parser.add_argument("--repeats", type=int, default=10, help="evaluations of each case for the noise part")
    parser.add_argument("--timing-s", type=float, default=2.0, help="EvalConfig.max_timing_s (default 2)")
    parser.add_argument("--loop-evals", type=int, default=40, help="Triton evaluations in the loop part")
    parser.add_argument("--loop-evals-cuda", type=int, default=8, help="CUDA evaluations in the loop part")
    parser.add_argument("--suite", default="ops", help="the built-in suite for speed of light (default ops)")
    parser.add_argument("--only", default="", help="comma-separated task names of the suite (default all)")
    parser.add_argument("--sol-budget", type=int, default=8, help="tuner candidates per task for speed of light")
    args = parser.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    if args.device == "cuda":
        import torch
        if not torch.cuda.is_available():
            parser.error("no CUDA device here; run on the GPU machine, or pass --device cpu for a dry run")
    ctx = Context(args)
    runners = {"env": part_env, "timer": part_timer, "noise": part_noise, "memory": part_memory,
               "energy": part_energy, "prompt": part_prompt, "loop": part_loop, "sol": part_sol,
               **gpu_proof_claims.RUNNERS}
    failed: list[str] = []
    try:
        for part in parts:
            t0 = time.monotonic()
            try:
                ctx.data[part] = runners[part](ctx)
            except Exception:  # noqa: BLE001 - one part's failure must not cost the others' GPU minutes
                failed.append(part)
                ctx.data[part] = {"error": traceback.format_exc()[-4000:]}
                print(f"gpu_proof: part {part} failed:\n{ctx.data[part]['error']}", file=sys.stderr, flush=True)
            ctx.data.setdefault("seconds", {})[part] = round(time.monotonic() - t0, 1)
            ctx.save()
    finally:
        ctx.evaluator.close()
    if failed:
        print(f"gpu_proof: {len(failed)} part(s) failed: {', '.join(failed)} (tracebacks above and in "
              f"{ctx.json_path})", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

