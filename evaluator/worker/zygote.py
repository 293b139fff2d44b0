"""A warm parent that forks one worker per evaluation (started by `sandbox/launch.py`, possibly inside bubblewrap).

It imports torch and Triton once (the candidate's zygote also dynamo), never initialises CUDA and never runs candidate
code itself. For each request on its control socket it receives the worker's channel socket and log pipe (SCM_RIGHTS),
forks, and the child becomes an isolated worker: a new session (its own process group), a fresh private temporary
directory as working directory and as Triton/torch-extension cache, resource limits, and stdout/stderr sent to the log
pipe.

Run as: python -m evaluator.worker.zygote CONTROL_FD DEVICE ROLE [lazy-flush]

`lazy-flush` (a one-shot evaluation's zygotes): no CPU eviction buffer written before the first fork; a worker whose
calls need one writes its own (`timing.CallTimer.evict`).
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import traceback

from evaluator.device.rules import rules
from evaluator.worker import memory_conditions
from evaluator.sandbox import process_tree

LAZY_FLUSH = "lazy-flush"
NO_DYNAMO = "no-dynamo"  # a candidate zygote without torch._dynamo (`warm_imports`)


def _prepare_environment(device: str) -> None:
    if (os.environ.get("TRITON_INTERPRET") == "1") != rules(device).triton_interpreted:
        raise SystemExit("evaluator.worker.zygote: TRITON_INTERPRET must be set by the parent before Python starts")
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # torch is imported already; zygote_env.openmp_environment decides


def _child(request: dict, chan_fd: int, log_fd: int, outputs_fd: int, inputs_fd: int | None, workdir: str,
           role: str) -> None:
    os.setsid()
    process_tree.set_subreaper()
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    os.chdir(workdir)
    for var in ("TMPDIR", "HOME"):
        os.environ[var] = workdir
    os.environ["TRITON_CACHE_DIR"] = os.path.join(workdir, "triton-cache")
    os.environ["TORCH_EXTENSIONS_DIR"] = os.path.join(workdir, "torch-extensions")
    tempfile.tempdir = workdir
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    sys.stdin = open(os.devnull)  # noqa: SIM115

    from evaluator.wire.input_file import InputReader
    from evaluator.wire.output_slot import WorkerSlot
    from evaluator.wire.frames import Channel
    from evaluator.worker.loop import Worker

    from evaluator.worker.guards import Guards
    from evaluator.worker.hardening import Limits, assert_fork_safe, harden
    from evaluator.worker.heap import keep_freed_memory
    from evaluator.worker.loop import CANDIDATE_MODULE
    assert_fork_safe()
    if rules(request["device"]).host_memory_kept:
        # Both roles: a timed call's output reuses freed memory instead of faulting in fresh pages in some calls and
        # not others, by the heap's history (the kernels' and the memory's time, as the stored copy bandwidth is).
        keep_freed_memory()
    guards = Guards()  # in both roles, so that reference and candidate pay the same per-call costs
    limits = Limits(int(request.get("memory_limit_bytes", 0)), int(request.get("cpu_limit_s", 0)),
                    float(request.get("gpu_memory_fraction", 0.0)))
    harden(request["device"], role, guards, limits, CANDIDATE_MODULE)
    channel = Channel(socket.socket(fileno=chan_fd), request["nonce"])
    inputs = None if inputs_fd is None else InputReader(inputs_fd, writable=role == "reference")
    Worker(channel, role, guards, WorkerSlot(outputs_fd), inputs).serve()


def warm_imports(role: str, device: str, flush_ahead: bool = True, dynamo: bool = True) -> None:
    """What every worker of the role would otherwise import or set up on its own: done once, before any fork. Without
    `dynamo`, a candidate's zygote skips `torch._dynamo` (0.8 s of a cold evaluation's critical path) and refuses it
    later (`dynamo_absent.py`): for candidates that need none (`warm_start.may_need_dynamo`)."""
    import torch  # warm imports shared by every forked worker
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except ImportError:
        pass
    if role == "candidate":
        # Before the guards exist: dynamo's import rewraps torch.manual_seed (a candidate importing it would be taken
        # for one patching torch) and registers library fragments for existing namespaces (torch.distributed's
        # functional collectives), which the dispatcher guard refuses to a candidate. PyTorch imports it lazily from
        # many places (torch.compile, torch.library.custom_op, checkpoint, the profiler's start): an honest kernel
        # would fail there. The reference's worker runs trusted code only, unguarded; it imports dynamo where a task
        # needs it (its op trace does not: op_trace.py), and the CPU it saves here goes to the candidate's zygote,
        # which a cold evaluation waits on.
        if dynamo:
            import torch._dynamo  # noqa: F401
        else:
            from evaluator.worker import dynamo_absent
            dynamo_absent.install()
    import evaluator.worker.dispatch_table  # noqa: F401
    import evaluator.worker.guards  # noqa: F401
    import evaluator.worker.loop  # noqa: F401
    import torch.utils.cpp_extension  # noqa: F401
    import evaluator.native  # noqa: F401 - load_c, served by the build stage in candidate workers
    # What every worker routes load_inline through (`build_redirect.install`: the CPU and CUDA extension specs, the
    # private CUDA check, the builder): imported after each fork instead, from source (a worker may write no
    # bytecode), they cost about 9 ms a worker.
    import evaluator.worker.build_redirect  # noqa: F401
    import torch.profiler  # noqa: F401
    from torch.autograd.profiler import record_function
    with record_function("opforge-warm-up"):  # its first use imports and caches the optional CUPTI monitor
        pass

    try:  # PyTorch's own lazily registered kernels (vmap's decompositions), before any snapshot or guard
        from torch._functorch.predispatch import lazy_load_decompositions
        lazy_load_decompositions()
    except ImportError:
        pass
    if role == "reference":
        from evaluator.worker.op_trace import OpTrace
        with OpTrace():  # the op trace of each trial's reference call, its first use's lazy set-up done here
            torch.ones(2).add(1)
    from evaluator.worker.hardening import assert_fork_safe
    assert_fork_safe()  # the warm imports above must not have started CUDA
    if role == "candidate" and not rules(device).cuda_runtime:
        # Where the worker starts CUDA, the table is taken after its warm-up there: CUDA's start registers kernels.
        evaluator.worker.dispatch_table.prime_dispatch_snapshot()
    if role == "candidate":
        # Last, once every module the zygote imports is loaded: what each worker's audit hook finds among them.
        from evaluator.worker import audit_hook
        audit_hook.prepare_ahead()
    from evaluator.build.native_build import compiler
    if rules(device).evicts_host_caches and flush_ahead and compiler("c") is None:
        # Where no compiler builds the harness's line flush (`line_flush.py`), the CPU timer's eviction buffer (four
        # last-level caches), shared by every forked worker, up to 256 MiB (`timing.PREPARE_AHEAD_MAX_BYTES`: 2.1 s
        # of CPU at the 1.9 GB of a VM that reports a 480 MiB cache); a zygote that forks one worker only skips it:
        # most tasks' inputs are below the eviction's bound, and a worker whose are not writes its own.
        from evaluator.worker import timing
        timing.prepare_cpu_flush()


def main() -> None:
    control_fd, device, role = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    serve(control_fd, device, role, LAZY_FLUSH not in sys.argv[4:], NO_DYNAMO not in sys.argv[4:])


def serve(control_fd: int, device: str, role: str, flush_ahead: bool, dynamo: bool = True) -> None:
    """The zygote's life: its warm imports, then one fork per request on its control socket until it closes. Run by
    `main` in a fresh interpreter, or in a fork of a driver that has imported torch (`forked_zygote.py`)."""
    _prepare_environment(device)
    if rules(device).host_memory_kept:
        # Both roles, before anything is allocated for the workers: 4 KiB pages and a kept heap, inherited by every
        # worker, so inputs, outputs and scratch are backed alike on both sides in every evaluation.
        memory_conditions.apply()
    # No automatic collection while torch, Triton (and dynamo) are imported: their objects are long-lived, and the
    # full collections that the import triggers find little and cost about a sixth of the start's CPU.
    gc.disable()
    warm_imports(role, device, flush_ahead, dynamo)
    # Every object so far becomes permanent: a worker's garbage collections (the candidate's drops the task's model
    # classes with a full one) scan only what the worker itself made, 0.25 s less per evaluation with torch, Triton
    # and the profiler imported; untouched object headers also keep the forked pages shared. No collection first:
    # it scanned all of the imports' half a million objects (0.2-0.8 s of CPU while the other zygote and the driver
    # start) to free about 9,000 (tuples, cells, functions and types of the imports, no file or socket among them).
    gc.freeze()
    gc.enable()
    control = socket.socket(fileno=control_fd)
    process_tree.set_subreaper()
    # The reference zygote holds the driver's full environment; the candidate zygote every worker's nonce.
    process_tree.set_undumpable()
    children: dict[int, str] = {}
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # The address of the builtin behind the workers' timer, and of the harness's reference to it: a fork keeps them,
    # so the driver compares what lies on the timer's path in a worker with this process's, which runs no candidate
    # code (`verify/timer_path.py`). One
    # reading binds the interpreter's clock_gettime slot here, as it is in every worker.
    from evaluator.worker import timing  # imported by the warm imports already
    timing.now_ms()
    control.sendall(json.dumps({"ready": True, "timer": id(timing.timer_clock()),
                                "timer_reference": timing.timer_reference()}).encode() + b"\n")
    while True:
        _reap(children)
        try:
            msg, fds, _, _ = socket.recv_fds(control, 65536, 4)
        except OSError:
            break
        if not msg:
            break
        request = json.loads(msg)
        if "kill" in request:
            pid = int(request["kill"])
            if pid in children:
                process_tree.kill_tree(pid)
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
                shutil.rmtree(children.pop(pid), ignore_errors=True)
            control.sendall(b'{"killed": true}\n')
            continue
        chan_fd, log_fd, outputs_fd = fds[:3]
        inputs_fd = fds[3] if len(fds) > 3 else None  # the evaluation's shared input file (input_file.py)
        workdir = tempfile.mkdtemp(prefix="opforge-eval-")
        pid = os.fork()
        if pid == 0:
            control.close()
            code = 0
            try:
                _child(request, chan_fd, log_fd, outputs_fd, inputs_fd, workdir, role)
            except BaseException:  # noqa: BLE001
                # Into the worker's log (stderr is its log pipe once _child got that far): a worker that fails
                # while starting says why, and the driver quotes it (connection.py: the reference's log tail).
                traceback.print_exc()
                code = 70
            finally:
                os._exit(code)
        os.close(chan_fd)
        os.close(log_fd)
        os.close(outputs_fd)
        if inputs_fd is not None:
            os.close(inputs_fd)
        children[pid] = workdir
        control.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    for pid in list(children):
        process_tree.kill_tree(pid)
    _reap(children, block=True)


def _reap(children: dict[int, str], block: bool = False) -> None:
    # Orphans re-parented to us (a worker's escaped descendants outliving it) are killed and reaped.
    for orphan in process_tree.live_children(os.getpid()):
        if orphan not in children:
            process_tree.kill_tree(orphan)
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        if pid in children:
            shutil.rmtree(children.pop(pid), ignore_errors=True)
    for pid in list(children):
        try:
            done, _ = os.waitpid(pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            shutil.rmtree(children.pop(pid), ignore_errors=True)


if __name__ == "__main__":
    main()
