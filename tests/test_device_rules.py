"""The evaluator branches on a device's rules (`evaluator/device/rules.py`), each named for why it differs, not on the
kind's name: the driver, the measures, the workers, their sandboxes and the builds alike."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evaluator.device.rules import CPU, CUDA, KINDS, rules

ROOT = Path(__file__).resolve().parent.parent
# A comparison with a kind's name: `x == "cpu"`, `"cuda" != x`, `x in ("cpu", "cuda")`, `x not in ["cuda"]`.
KIND_TEST = re.compile(r"""[!=]=\s*["'](?:cpu|cuda)["']|["'](?:cpu|cuda)["']\s*[!=]="""
                       r"""|\bin\s*[(\[{][^)\]}]*["'](?:cpu|cuda)["']""")


def test_each_resolved_kind_has_its_rules_and_nothing_else_does() -> None:
    assert rules("cpu") is CPU and rules("cuda") is CUDA
    # A task check's shapes-only device: the CPU's workers, with nothing to evict and nothing drawn to size first.
    meta = rules("meta")
    assert meta.kind == "meta" and not meta.evicts_host_caches and not meta.sized_before_drawing and meta.host_timer
    assert "meta" not in KINDS
    with pytest.raises(ValueError, match="a resolved kind is cpu or cuda"):
        rules("auto")
    # What only the CPU needs: the candidate shares the timed cores, memory and caches with the trusted side.
    assert CPU.trusted_inputs and CPU.worker_cpu_read and CPU.keep_off_timed_cores and not CPU.gpu_memory_share
    assert CUDA.gpu_memory_share and not CUDA.trusted_inputs and CUDA.profiler == "ncu"


# Every package of the evaluator branches on a device's rules, each named for why it differs. What stays, file by
# file with the number of its comparisons, is a kind's identity, not a difference of method: a user's `--device`
# string that may still be `auto`, or a tensor's own device as torch defines it (where its memory lives and its ops
# run), whatever the evaluation's device is.
KIND_NAMES_ALLOWED = {
    "driver/ray_runner.py": (1, "cfg.device is the user's request (auto, cpu or cuda), read before any device "
                                "resolves"),
    "worker/fast_draws.py": (2, "the harness library fills host memory only: a tensor elsewhere is left to torch"),
    "worker/kernel_stores.py": (1, "the store ledger covers host memory, which the interpreter's kernels write"),
    "worker/call_watch.py": (1, "an output is judged by the store ledger only where it lies in host memory"),
    "worker/task_runtime.py": (3, "a drawn tensor's own device: the library's draws fill host memory, ATen's grain "
                                  "size is the CPU's, and a task's .cuda() or device= names torch's devices"),
    "wire/input_file.py": (1, "only host memory can be mapped into the shared input file, whatever the device"),
}


def kind_comparisons(root: Path) -> dict[str, list[str]]:
    """Each module under `root` (an `evaluator/` tree) that compares with a kind's name: a line per comparison."""
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        lines = [f"{n}: {line.strip()}" for n, line in enumerate(path.read_text().splitlines(), 1)
                 for _ in KIND_TEST.finditer(line)]  # a line once per comparison: a second on it is counted too
        if lines:
            found[path.relative_to(root).as_posix()] = lines
    return found


def test_no_package_of_the_evaluator_compares_kind_names() -> None:
    found = kind_comparisons(ROOT / "evaluator")
    unexpected = [f"{rel}:{line}" for rel, lines in found.items() for line in lines if rel not in KIND_NAMES_ALLOWED]
    assert not unexpected, ("branch on device.rules.rules(kind), a field named for why, instead:\n"
                            + "\n".join(unexpected))
    # An allowed file holds its counted comparisons and no more: one more is a branch that came back; one fewer,
    # an entry to lower (or drop) so that the next one is caught.
    counts = {rel: len(found.get(rel, [])) for rel in KIND_NAMES_ALLOWED}
    assert counts == {rel: n for rel, (n, _) in KIND_NAMES_ALLOWED.items()}, "\n".join(
        f"{rel}:{line}" for rel in KIND_NAMES_ALLOWED for line in found.get(rel, []))


def test_a_comparison_that_comes_back_is_caught(tmp_path: Path) -> None:
    """The scan reads every sub-package, each spelling of a comparison, and none of the rules' own uses."""
    for line in ('if device == "cpu":', "if kind != 'cuda':", 'if "cuda" == kind:', 'if requested in ("cpu", "cuda"):',
                 'if kind not in ["auto", "cuda"]:', 'ok = x.device.type != "cpu"', 'if k in {"cpu"}:'):
        assert KIND_TEST.search(line), line
    for line in ('if rules(kind).cuda_runtime:', 'torch.device("cpu")', 'kind = "cuda" if gpu else "cpu"',
                 '_BY_KIND = {"cpu": CPU, "cuda": CUDA}', 'if requested in KINDS:'):
        assert not KIND_TEST.search(line), line
    (tmp_path / "sandbox" / "deep").mkdir(parents=True)
    (tmp_path / "backend.py").write_text("def f(kind):\n    return kind == 'cuda' or kind == 'cpu'\n")
    (tmp_path / "sandbox" / "deep" / "x.py").write_text("if rules(d).device_nodes:\n    pass\nif d != \"cpu\": pass\n")
    assert kind_comparisons(tmp_path) == {"backend.py": ["2: return kind == 'cuda' or kind == 'cpu'"] * 2,
                                          "sandbox/deep/x.py": ['3: if d != "cpu": pass']}


def test_the_allow_list_names_real_files_with_reasons() -> None:
    assert all((ROOT / "evaluator" / rel).is_file() and n > 0 and why for rel, (n, why) in KIND_NAMES_ALLOWED.items())
    assert len(KIND_NAMES_ALLOWED) <= 8  # small: a new entry is a kind's identity, argued, not a method's difference


def test_every_rule_is_set_for_both_kinds_and_some_differ_for_a_reason() -> None:
    """A field added to the rules gets a value for each kind (a dataclass without defaults refuses a missing one), and
    the fields that name a method differ between the kinds: that is why they exist."""
    assert CPU.host_timer and not CUDA.host_timer
    assert CPU.energy_meter == "rapl" and CUDA.energy_meter == "nvml"
    assert CPU.triton_interpreted and not CUDA.triton_interpreted
    assert CPU.machine_load_read and not CUDA.machine_load_read
    assert CPU.clock_gap_floor_ms > CUDA.clock_gap_floor_ms > 0
    # The workers' side: what starts, confines and times a worker of each kind.
    assert CUDA.cuda_runtime and not CPU.cuda_runtime
    assert CPU.host_memory_kept and CPU.evicts_host_caches and CPU.reference_zygote_forked and CPU.file_sandbox
    assert not (CUDA.host_memory_kept or CUDA.evicts_host_caches or CUDA.reference_zygote_forked or CUDA.file_sandbox)
    assert CUDA.device_nodes and CUDA.lock_per_device and not (CPU.device_nodes or CPU.lock_per_device)
    assert (CPU.extension_build, CUDA.extension_build) == ("check", "link")
    assert KINDS == ("cpu", "cuda") and all(rules(k).kind == k for k in KINDS)
