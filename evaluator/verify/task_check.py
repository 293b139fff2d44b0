"""`opforge task check`: a task loaded in a trusted reference worker and run once per shape variant, and on a real
device the degenerate-task check (`degenerate_probes.py`). No candidate is involved."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evaluator.device.rules import rules
from evaluator.wire.commands import Load, Run
from evaluator.config import EvalConfig
from evaluator.driver.connection import Refused, WorkerConnection
from evaluator.verify.degenerate_probes import probe_task
from evaluator.device.info import resolve_device
from evaluator.measure.blocks import fresh_seed
from evaluator.task import Task, TaskError
from evaluator.worker.task_size import HELD_COPIES, TaskSize, available_bytes, refusal
from evaluator.wire.replies import Ran, Ready

META_NOTE = "shapes only: the degenerate-task checks need real values (run without --meta; the CPU by default)"

# (device kind, role, nonce, config, task) -> a worker forked from that role's zygote
Connect = Callable[[str, str, str, EvalConfig, Task], WorkerConnection]


@dataclass(frozen=True, slots=True)
class TaskReport:
    """What `task check` found: the variants and the shapes and dtypes going in and out, and on a real device the
    degenerate-task findings (outputs a constant or a stored result reproduces, inputs or weights it ignores)."""

    variants: tuple[dict[str, Any], ...]
    inputs: tuple[tuple[dict[str, Any], ...], ...]
    outputs: tuple[tuple[dict[str, Any], ...], ...]
    ops: tuple[str, ...]
    device: str
    degenerate: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    degenerate_checked: bool = False  # False on the meta device: values are unknown there
    sizes: tuple[TaskSize, ...] = ()  # each variant's bytes a call, from the meta device (empty: unknown)


def check_task(connect: Connect, task: Task, device: str = "cpu", timeout_s: float = 300.0,
               interpreter_shape: bool = False, cpu_fallback: bool = True) -> TaskReport:
    """Load the task in the trusted reference worker and run it once per shape variant; on a real device, also run
    the degenerate-task check on the benchmark shape (a second seed, each input redrawn alone, another init seed:
    2 + one run per input). On the meta device (shapes only), a task that needs real values (`.item()`,
    data-dependent shapes) is run on the CPU instead, still shapes only. With `interpreter_shape`, the benchmark shape
    is the task's INTERPRETER_SHAPE where it has one: the shapes a Triton kernel on a CPU was checked at. Without
    `cpu_fallback`, a task the meta device cannot run is a TaskError (nothing runs at its real size)."""
    if device != "meta":
        return _check(connect, task, device, timeout_s, probe=True)
    try:
        report = _check(connect, task, "meta", timeout_s, probe=False, interpreter_shape=interpreter_shape)
    except TaskError as meta_error:
        if not cpu_fallback:
            raise
        try:
            report = _check(connect, task, "cpu", timeout_s, probe=False, interpreter_shape=interpreter_shape)
        except TaskError as cpu_error:
            on_cpu = str(cpu_error).removeprefix(f"{task.label}: ")
            if on_cpu in str(meta_error):
                raise meta_error from None
            raise TaskError(f"{meta_error} (and on the CPU: {on_cpu})") from None
        report = dataclasses.replace(report, device="cpu (the meta device could not run it)")
    return dataclasses.replace(report, notes=report.notes + (META_NOTE,))


def _check(connect: Connect, task: Task, device: str, timeout_s: float, probe: bool,
           interpreter_shape: bool = False) -> TaskReport:
    kind = device if device == "meta" else resolve_device(device)
    conn = connect("cpu" if kind == "meta" else kind, "reference", secrets.token_hex(16), EvalConfig(), task)
    try:
        reply, _ = conn.request_as(Load(task_source=task.source, task_name=task.name, device=kind,
                                        init_seeds=(fresh_seed(),) * 64, interpreter_shape=interpreter_shape,
                                        size_task=True),
                                   Ready, timeout_s, "loading")
        n = reply.variants
        sizes = tuple(s for s in map(TaskSize.from_wire, reply.sizes or ()) if s is not None)
        # At its size, before any variant is drawn (task_size.py); the meta device draws nothing.
        if rules(kind).sized_before_drawing:
            too_big = refusal(task.label, list(sizes), available_bytes(), EvalConfig().memory_limit_bytes)
            if too_big:
                raise TaskError(too_big)
        inputs, outputs, ops = [], [], set[str]()
        base_seed, base = fresh_seed(), list[Any]()
        for v in range(n):
            r, got = conn.request_as(Run(variant=v, seed=base_seed if v == 0 else fresh_seed(), trace=v == 0,
                                         describe_inputs=True), Ran, timeout_s, f"running shape variant {v}")
            inputs.append(tuple(dict(d) for d in r.inputs or ()))
            outputs.append(tuple(dict(d) for d in r.outputs))
            ops.update(r.ops)
            base = got if v == 0 else base
        variants = tuple(dict(v) for v in (reply.variant_overrides or ({},) * n))
        report = TaskReport(variants, tuple(inputs), tuple(outputs), tuple(sorted(ops)), kind, sizes=sizes)
        if not probe or kind == "meta":
            return report
        findings, notes = probe_task(conn, timeout_s, base_seed, base, inputs[0],
                                     None if reply.tolerance is None else dict(reply.tolerance))
        return dataclasses.replace(report, degenerate=tuple(findings), notes=tuple(notes), degenerate_checked=True)
    except Refused as exc:
        raise TaskError(f"{task.label}: {exc.reason}") from None
    finally:
        conn.close()
