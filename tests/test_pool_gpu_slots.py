"""`RayRunner` on a cluster that has GPUs: one actor per GPU, each pinned to its own device, holding no CPU.

Ray schedules on declared resources, so a local Ray started with two logical GPUs exercises the placement on a
machine without one (the evaluations themselves run on the CPU). On a real GPU machine the same code path is what
`tests/test_cheats.py`'s `gpu` tests and the issue-8 measurements run through.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from benchmarks import builtin_task, seed_for
from evaluator import EvalConfig, Status, load_candidate, load_task
from evaluator.driver.ray_runner import RayRunner

TASK = Path(__file__).parent / "tasks" / "relu.py"
FAST = EvalConfig(max_timing_s=0.3, trials=1, profile=False, warmup_ms=5.0, device="cpu")
LOGICAL_GPUS = 2
CPUS = 2


@pytest.fixture()
def ray_with_two_gpus():
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=CPUS, num_gpus=LOGICAL_GPUS, include_dashboard=False, logging_level=logging.ERROR,
             log_to_driver=False, object_store_memory=128 * 2**20)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_one_actor_per_gpu_each_on_its_own_device_and_holding_no_cpu(ray_with_two_gpus):
    ray = ray_with_two_gpus
    task = load_task(TASK)
    seed = load_candidate(seed_for(builtin_task("relu")), origin="seed")
    runner = RayRunner(workers=5)  # `workers` counts CPU actors; with GPUs the GPU count decides
    try:
        assert runner.uses_gpus and runner.capacity == LOGICAL_GPUS
        futures = [runner.submit(task, seed, FAST) for _ in range(4)]
        assert [f.result(timeout=300).status for f in futures] == [Status.OK] * 4
        actors = [a for a in runner.actors if a is not None]
        assert len(actors) == LOGICAL_GPUS and runner.stats().actors_started == LOGICAL_GPUS
        placements = ray.get([a.placement.remote() for a in actors], timeout=60)
        gpu_ids = [tuple(p["gpu_ids"]) for p in placements]
        assert all(len(ids) == 1 for ids in gpu_ids) and len(set(gpu_ids)) == LOGICAL_GPUS, placements
        assert all(p["cuda_visible_devices"] == p["gpu_ids"][0] for p in placements), placements
        assert len({p["pid"] for p in placements}) == LOGICAL_GPUS
        # The GPU actors reserve no CPU: every CPU stays free for the CUDA build tasks.
        assert ray.available_resources().get("CPU", 0) == CPUS
        assert ray.available_resources().get("GPU", 0) == 0
    finally:
        runner.close()
