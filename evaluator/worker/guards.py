"""In-process defences of the candidate worker, armed before any candidate code is imported.

These are the second line (the first is the static policy; the last word is always the driver's own checks on what
comes back): captured clocks and primitives, counters of kernel launches, a fingerprint of the modules a cheat would
patch, thread accounting, and the op trace that tells a kernel from a PyTorch fallback.
"""

from __future__ import annotations

import _thread
import builtins
from operator import is_
import os
import random
import sys
import time
import types
from typing import TYPE_CHECKING, Any, Callable

import torch

from evaluator.worker import audit_hook
from evaluator.worker import kernel_stores
from evaluator.sandbox import process_tree
from evaluator.wire.build_verdict import BuildKind, BuildVerdict
from evaluator.worker.dispatch_table import (TableText, dispatch_dump, dispatch_table, existing_namespaces,
                                      take_primed_dispatch, without_meta)
from evaluator.worker.private_builtins import BUILTINS

__builtins__ = BUILTINS  # type: ignore[assignment]  # the harness's own copy (private_builtins.py)

if TYPE_CHECKING:
    from evaluator.wire.commands import Built

# The libraries' modules whose names the harness relies on in a worker. The evaluator's own are not listed: every one
# loaded in the worker when the snapshot is taken is watched (`worker_modules`), so a module that joins the worker is
# watched without anyone remembering to add it here.
_WATCHED_LIBRARY_MODULES = ("torch", "torch.nn.functional", "torch.cuda", "torch.testing", "time", "threading",
                            "_thread", "builtins", "torch.utils.cpp_extension", "triton", "triton.runtime.jit",
                            "triton.testing", "triton.runtime.interpreter", "triton.runtime.autotuner", "torch._C",
                            "torch.library", "collections", "json", "json.encoder", "json.decoder", "socket", "struct")
_PACKAGE = __name__.partition(".")[0]  # "evaluator"


def worker_modules(loaded: dict[str, Any] | None = None) -> tuple[str, ...]:
    """The evaluator's modules loaded in this process (`sys.modules` unless `loaded`): in a worker at its snapshot,
    every module of the package that runs there, imported by its zygote before the fork or by its own start."""
    names = sys.modules if loaded is None else loaded
    return tuple(sorted(n for n in names if n == _PACKAGE or n.startswith(_PACKAGE + ".")))


_WATCHED_CLASSES = (torch.Tensor, torch.nn.Module)

COPY_OPS_CHECK_SHARE = 0.25
_COPY_OPS = ("aten::clone", "aten::copy_", "aten::_to_copy", "aten::empty_like", "aten::empty_strided",
             "aten::empty.memory_format", "aten::detach", "aten::alias", "aten::contiguous",
             "aten::view", "aten::equal")


class Guards:
    def __init__(self, watched_modules: tuple[str, ...] | None = None) -> None:
        """`watched_modules`: the modules whose names `tampered` compares; by default the libraries' listed above
        and, at each snapshot, every evaluator module then loaded (`worker_modules`)."""
        self.fixed_modules = watched_modules
        self.watched_modules = watched_modules if watched_modules is not None else _WATCHED_LIBRARY_MODULES
        # Captured before the candidate exists: later patches of these names do not reach the harness.
        self.now_ns: Callable[[], int] = time.perf_counter_ns
        self.cpu_s: Callable[[], float] = time.process_time  # every thread of this process, PyTorch's pools too
        self.draw: Callable[[], float] = random.Random(os.urandom(16)).random  # bound now: patching Random later
        self.thread_count: Callable[[], int] = _thread._count
        self.exact_type = builtins.type
        self.tensor_type = torch.Tensor
        self.clone: Callable[[torch.Tensor], torch.Tensor] = torch.Tensor.clone
        self.ledger = kernel_stores.StoreLedger()  # the bytes Triton kernels stored (interpreter only)
        self.stores_accounted = False  # True once the interpreter's stores go through the ledger
        self.notes: set[str] = set()  # facts for the verdict (interpreter_gaps: autotune ran one config)
        self.host_exports = [0]  # elements moved from tensors to the host (call_watch.install_host_export_counter)
        self.thread_starts = [0]  # Python threads started since the worker began (install_thread_counter)
        self.launches: dict[str, int] = {}  # a plain dict: a builtin's methods cannot be patched (Counter's can)
        # namespace label -> (module or class, its names, their values): held, so compared by identity
        self._snapshot: dict[str, tuple[Any, tuple[str, ...], tuple[Any, ...]]] = {}
        self._views: list[tuple[Any, tuple[str, ...], tuple[Any, ...]]] = []
        self._private_builtins = _contents(BUILTINS)
        self._classes: list[type] = list(_WATCHED_CLASSES)
        self.baseline_threads = 0
        # The process's OS threads (/proc/self/task): what native code starts is invisible to Python's count. Counted
        # on a CPU only (a GPU's runtime starts threads of its own lazily); None until the snapshot.
        self.os_thread_count: Callable[[], int] = process_tree.os_thread_count
        self.baseline_os_threads: int | None = None
        self.spare_threads = 0  # threads beyond the baseline that may stay (parked: the driver judges their CPU)
        # Set by the worker while it imports the candidate: asks the driver for a cached CUDA build (build_stage.py).
        self.build_client: Callable[..., tuple[Built, list[Any]]] | None = None  # (spec, kind="cuda")
        self.build_mode = "check"  # the driver's: check (compile only) | link (a loadable extension)
        self.collecting = False  # record the builds only (the build stage), returning stubs
        self.refusals: list[str] = []  # what the audit hook and the dispatcher guard refused, first first
        self._dispatch: dict[str, str] = {}  # operator name -> its dispatch table's text at the snapshot
        self._dispatch_text: TableText | None = None  # the same texts laid end to end (the zygote's snapshot)

    # -- reaching the harness -------------------------------------------------------------------------------------
    def install_audit_hook(self, candidate_module: str) -> None:
        """See `evaluator.worker.audit_hook.install`: frames, the object graph, raw memory and the harness's classes are
        out of the candidate's reach; refusals land in `refusals`."""
        audit_hook.install(self.refusals, candidate_module)

    # -- PyTorch's dispatcher -------------------------------------------------------------------------------------
    def install_dispatch_guard(self) -> None:
        """Refuse kernels registered for PyTorch's existing operators (a Python kernel for aten::clone runs inside
        the harness's own calls, after the timer has stopped). Operators in new namespaces are fine."""
        real = torch._C._dispatch_library
        existing = existing_namespaces()  # on a CPU, those of the zygote's table, the worker's snapshot too
        refusals = self.refusals

        def guarded_library(kind: str, ns: str, *args: Any, **kwargs: Any) -> Any:
            if kind in ("IMPL", "FRAGMENT") and ns in existing:
                refusals.append(f"the candidate registered kernels for PyTorch's own '{ns}' operators")
                raise RuntimeError(f"opforge refused a {kind} library for the existing namespace '{ns}': kernels "
                                   "may be defined for new operators only")
            return real(kind, ns, *args, **kwargs)

        torch._C._dispatch_library = guarded_library  # type: ignore[assignment] # the guard takes the same calls

    def copy_ops_changed(self) -> str | None:
        """The operators the harness runs on a call's outputs right after it (copies, allocations), checked after a
        random quarter of the calls (~0.2 ms each): a kernel registered for them and removed before the next full
        check still shows, since it must be there at every call it serves."""
        if self.draw() >= COPY_OPS_CHECK_SHARE:
            return None
        changed = None
        for name in _COPY_OPS:  # every table read, snapshot or not: the same cost in both workers
            if not self._same_kernels(name, dispatch_dump(name)) and changed is None:
                changed = f"the kernels of {name}"
        return changed

    def _same_kernels(self, name: str, now: str) -> bool:
        """Whether an operator's kernels are those of the snapshot (True where there is none). The dump's text is
        compared as it is first (one string comparison at C speed); only where it differs are the meta kernels
        set aside, and a text that differs only by them becomes the new reference."""
        before = self._dispatch.get(name)
        if before is None or now == before:
            return True
        if without_meta(now) != without_meta(before):
            return False
        self._dispatch[name] = now
        return True

    def dispatcher_changed(self, deep: bool) -> str | None:
        """A dispatch or function mode left active (it would see every tensor operation of the harness); with
        `deep` (about 50 ms), also the first existing operator whose kernels changed since the snapshot, a backstop
        behind the guard: libraries PyTorch created itself can register kernels too."""
        if torch._C._len_torch_dispatch_stack() or torch._C._len_torch_function_stack():
            return "a dispatch or function mode left active"
        if torch._C._dispatch_tls_is_dispatch_key_included(torch._C.DispatchKey.PythonDispatcher):
            return "the Python dispatcher left enabled (Python kernels registered with py_impl would run)"
        if not deep:
            return None
        laid = self._dispatch_text
        if laid is None:
            for name in list(self._dispatch):
                if not self._same_kernels(name, dispatch_dump(name)):
                    return f"the kernels of {name}"
            return None
        # Each operator's dump against its span of the zygote's text first (a length and one comparison at C speed);
        # where it differs, against the snapshot as `_same_kernels` keeps it (meta kernels registered since).
        text, start = laid.text, 0
        for name, end in zip(laid.names, laid.ends):
            now = dispatch_dump(name)
            if not (len(now) == end - start and text.startswith(now, start)) and not self._same_kernels(name, now):
                return f"the kernels of {name}"
            start = end
        return None

    # -- launches -------------------------------------------------------------------------------------------------
    def install_launch_counters(self, cuda_available: bool) -> None:
        counter = self.launches
        ledger = self.ledger
        take_stored = ledger.take_stored

        def counting_kernel(original: Callable, interpreted: bool) -> Callable:  # keyed by kernel: which kernels ran
            def run(kernel: Any, *args: Any, **kwargs: Any) -> Any:
                # A launch counts once it returned having done work: under the interpreter, once it stored bytes
                # (a grid of zero programs, a launch that raises, stores all masked off: not a launch); elsewhere
                # once it returned with a grid of at least one program.
                label = f"triton:{getattr(getattr(kernel, 'fn', None), '__name__', '?')}"
                if kwargs.get("warmup"):
                    return original(kernel, *args, **kwargs)
                take_stored()
                result = original(kernel, *args, **kwargs)
                worked = take_stored() > 0 if interpreted else _programs(kwargs.get("grid")) != 0
                if worked:
                    counter[label] = counter.get(label, 0) + 1
                return result
            run.__wrapped__ = original  # type: ignore[attr-defined]
            return run

        try:
            from triton.runtime import interpreter
            self.stores_accounted = os.environ.get("TRITON_INTERPRET") == "1" and kernel_stores.install(ledger)
            interpreter.InterpretedFunction.run = counting_kernel(interpreter.InterpretedFunction.run,
                                                                  self.stores_accounted)
            if cuda_available:
                install_compiled_launch_counter(counter)
            else:
                from triton.runtime import jit
                jit.JITFunction.run = counting_kernel(jit.JITFunction.run, False)
        except ImportError:
            pass

    def native_build(self, spec: Any) -> bytes | None:
        """A `load_c` call's library, from the driver's build stage (`native_stage.py`): its bytes, None while the
        driver only collects the builds; raises NativeBuildError with the compiler's log or the reason."""
        from evaluator.build.native_build import NativeBuildError
        if self.build_client is None:
            raise NativeBuildError(f"load_c({spec.name!r}) was called after the candidate was imported; in a "
                                   "candidate, call load_c at module level so the evaluator can build it")
        built, blobs = self.build_client(spec.to_json(), BuildKind.NATIVE)
        if built.verdict == BuildVerdict.BUILT:
            if self.collecting:
                return None
            if blobs:
                return blobs[0].numpy().tobytes()
        if built.verdict == BuildVerdict.COMPILE_ERROR:
            raise NativeBuildError(built.log or f"load_c({spec.name!r}): the sources do not compile")
        raise NativeBuildError(built.log or f"load_c({spec.name!r}) could not be built ({built.verdict.value})")


    def launches_since(self, before: dict[str, int]) -> dict[str, int]:
        """Launches per kernel since `before` (a copy of `launches` taken earlier)."""
        return {k: n - before.get(k, 0) for k, n in self.launches.items() if n > before.get(k, 0)}

    # -- tampering ------------------------------------------------------------------------------------------------
    def take_snapshot(self, dispatcher: bool = False) -> None:
        """What `tampered` compares with; with `dispatcher` (the candidate's worker; about 50 ms) the dispatch
        table too, for `dispatcher_changed(deep=True)`, and on a CPU the count of the process's OS threads."""
        self.baseline_threads = self.thread_count()
        self.baseline_os_threads = None
        self.spare_threads = process_tree.spare_threads(torch.get_num_threads())
        if dispatcher and not torch.cuda.is_initialized():  # the candidate's worker, on a CPU
            process_tree.warm_thread_pools()  # OpenMP's pool exists before the count, as in any worker
            self.baseline_os_threads = self.os_thread_count()
        if dispatcher:
            primed = take_primed_dispatch()
            self._dispatch, self._dispatch_text = primed if primed is not None else (dispatch_table(), None)
        if self.fixed_modules is None:
            self.watched_modules = _WATCHED_LIBRARY_MODULES + worker_modules()
        for name in self.watched_modules:
            module = sys.modules.get(name)
            if module is not None:
                self._snapshot[name] = (module, *_contents(vars(module)))
        self._classes = list(_WATCHED_CLASSES) + [  # and the classes those modules define (Channel, Counter...)
            v for name in self.watched_modules if (m := sys.modules.get(name)) is not None
            for v in vars(m).values() if isinstance(v, type) and getattr(v, "__module__", None) == name]
        for cls in self._classes:
            self._snapshot[f"{cls.__module__}.{cls.__qualname__}"] = (cls, *_contents(vars(cls)))
        self._views = list(self._snapshot.values())
        self._private_builtins = _contents(BUILTINS)

    def builtins_changed(self) -> str | None:
        """The first builtin replaced since the snapshot (~10 us: run right after every call), in the `builtins`
        module or in the harness's private copy (`private_builtins.py`, which this check's own lookups use)."""
        entry = self._snapshot.get("builtins")
        if entry is None:
            return None
        _, keys, values = entry
        for now, (keys, values) in ((vars(builtins), (keys, values)), (BUILTINS, self._private_builtins)):
            if len(now) == len(keys) and all(map(is_, keys, now)) and all(map(is_, values, now.values())):
                continue
            for key, value in zip(keys, values):
                if key != "_" and (key not in now or now[key] is not value):
                    return key if now is not BUILTINS else f"{key} (the harness's own copy)"
        return None

    def tampered(self) -> str | None:
        """The first watched name whose value changed since the snapshot, e.g. 'time.perf_counter'.

        Values are compared by identity with `operator.is_` over the namespaces' contents, never with `==` (which
        would run a replacement's own `__eq__`) nor `id()` (an audited call: the audit hook would run ~26,000 times
        a check). The whole state is compared at C speed first; names are walked one by one only where something
        differs, and a namespace that merely gained names (a lazily created attribute) is then taken as it is now."""
        for name in self.watched_modules:  # a module swapped in sys.modules reaches the harness's later imports
            entry = self._snapshot.get(name)
            if entry is not None and sys.modules.get(name) is not entry[0]:
                return f"sys.modules[{name!r}]"
        changed = None
        for i, (ns, keys, values) in enumerate(self._views):
            now = vars(ns)
            if len(now) == len(keys) and all(map(is_, keys, now)) and all(map(is_, values, now.values())):
                continue
            changed = changed or self._changed_name(ns)
            if changed is None:
                self._views[i] = (ns, *_contents(now))
        return changed

    def _changed_name(self, ns: Any) -> str | None:
        for name, (original, keys, values) in self._snapshot.items():
            if original is not ns:
                continue
            now = vars(ns)
            label = name if isinstance(ns, types.ModuleType) else ns.__qualname__
            for key, value in zip(keys, values):
                if key in ("__warningregistry__", "_") or key.startswith("__pycache"):
                    continue
                if key not in now or now[key] is not value:
                    return f"{label}.{key}"
        return None

    def extra_threads(self) -> int:
        """Threads beyond those before the candidate: Python's, and on a CPU the process's OS threads, so that a
        native kernel that raised OpenMP's thread count (its pool keeps the extra threads) is seen too. Up to
        `spare_threads` may stay, judged by their CPU while the worker waits (`call_checks.idle` here, each thread's
        by the driver: `worker_cpu.WorkerThreads`)."""
        extra = self.thread_count() - self.baseline_threads
        if self.baseline_os_threads is not None:
            extra = max(extra, self.os_thread_count() - self.baseline_os_threads)
        return extra

    # -- outputs --------------------------------------------------------------------------------------------------
    def output_problem(self, outputs: list[Any], inputs: list[Any]) -> str | None:
        """A structural reason to refuse the outputs of one call, or None."""
        spans = []
        for x in inputs:
            if isinstance(x, torch.Tensor) and x.numel():
                start = x.untyped_storage().data_ptr()
                spans.append((start, start + x.untyped_storage().nbytes()))
        for i, out in enumerate(outputs):
            if self.exact_type(out) is not self.tensor_type:
                return f"output {i} is a {self.exact_type(out).__name__}, not a plain torch.Tensor"
            if out.numel():
                s = out.untyped_storage().data_ptr()
                e = s + out.untyped_storage().nbytes()
                if any(s < ie and is_ < e for is_, ie in spans):
                    return f"output {i} shares memory with an input (outputs must be fresh tensors)"
        return None


def install_compiled_launch_counter(counter: dict[str, int], kernel_class: Any = None) -> None:
    """On a GPU, count at the launch of a compiled kernel: Triton calls `CompiledKernel.launch_metadata` right before
    every launch, both from `JITFunction.run` (kernel[grid](...), autotuned or not) and from a compiled kernel's own
    `kernel.warmup(...)[grid](...)`, and not for a warm-up that only compiles. Counting `JITFunction.run` instead
    would miss the second path and count the third."""
    if kernel_class is None:
        from triton.compiler.compiler import CompiledKernel
        kernel_class = CompiledKernel
    original = kernel_class.launch_metadata

    def launch_metadata(kernel: Any, *args: Any, **kwargs: Any) -> Any:
        fn = getattr(getattr(kernel, "src", None), "fn", None)
        label = f"triton:{getattr(fn, '__name__', None) or getattr(kernel, 'name', '?')}"
        if args and _programs(args[0]) != 0:  # a grid of zero programs launches nothing
            counter[label] = counter.get(label, 0) + 1
        return original(kernel, *args, **kwargs)
    launch_metadata.__wrapped__ = original  # type: ignore[attr-defined]
    kernel_class.launch_metadata = launch_metadata


def _contents(namespace: Any) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    return tuple(namespace), tuple(namespace.values())


def _programs(grid: Any) -> int | None:
    """Programs in a launch's grid, when the grid is a plain tuple of ints (None when it cannot be told)."""
    if isinstance(grid, int):
        return grid
    if isinstance(grid, tuple) and all(isinstance(g, int) for g in grid):
        n = 1
        for g in grid:
            n *= g
        return n
    return None
