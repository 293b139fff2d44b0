"""A worker's extension builds, routed to its driver and counted as launches: `torch.utils.cpp_extension.load_inline`
and `load` replaced, and `load_c` served (`native.serve`), once the guards' launch counters are in
(`hardening.harden`).

- A CPU extension while the candidate is imported goes to the driver's build stage (`cpu_extension.prebuilt`), never
  to a private build;
- a CUDA one to the driver's build cache first (`cuda.prebuilt`); where none answers, on a machine without a GPU
  it is compile-checked privately (`cuda_fallback.check_compiles`), and with one PyTorch's own `load_inline` builds it;
- `load_c`'s libraries come from the build stage (`Guards.native_build`).

Every function of a loaded extension is counted in `Guards.launches` as `extension:<name>` when called.
"""

from __future__ import annotations

import types
from typing import Any, Callable

from evaluator import native
from evaluator.build import cpu_extension
from evaluator.build import cuda as cuda_build
from evaluator.worker.cuda_fallback import check_compiles
from evaluator.worker.guards import Guards


def install(guards: Guards, cuda_available: bool) -> None:
    """Replaces `load_inline` and `load` in this process and serves `load_c`, with the build client, mode and
    collecting flag that `guards` holds when each call comes (`candidate_import.import_candidate` sets them)."""
    from torch.utils import cpp_extension
    counter = guards.launches

    def counting(original: Callable, label: str) -> Callable:
        def run(*args: Any, **kwargs: Any) -> Any:
            counter[label] = counter.get(label, 0) + 1
            return original(*args, **kwargs)
        run.__wrapped__ = original  # type: ignore[attr-defined]
        return run

    def wrap_module(module: Any) -> Any:
        proxy = types.SimpleNamespace()
        for name in dir(module):
            fn = getattr(module, name)
            if callable(fn) and not name.startswith("_"):
                setattr(proxy, name, counting(fn, f"extension:{name}"))
        return proxy

    real_load_inline, real_load = cpp_extension.load_inline, cpp_extension.load

    def load_inline(name: str, cpp_sources: Any, cuda_sources: Any = None, **kwargs: Any) -> Any:
        if guards.build_client is not None and cpu_extension.routed(cuda_sources, kwargs):
            # A CPU extension while the candidate is imported: the driver's build stage, never a private build.
            return wrap_module(cpu_extension.prebuilt(guards.build_client, guards.collecting, name, cpp_sources,
                                                      kwargs))
        if cuda_sources:
            # The driver's build cache first; None: no driver, an uncacheable call or a skipped build.
            built = cuda_build.prebuilt(guards.build_client, guards.build_mode, guards.collecting, cuda_available,
                                        name, cpp_sources, cuda_sources, kwargs)
            if built is not None:
                return wrap_module(built)
            if not cuda_available:
                check_compiles(name, cpp_sources, cuda_sources, kwargs)  # raises either way
        return wrap_module(real_load_inline(name, cpp_sources, cuda_sources, **kwargs))

    def load(name: str, sources: Any, **kwargs: Any) -> Any:
        return wrap_module(real_load(name, sources, **kwargs))

    cpp_extension.load_inline = load_inline  # type: ignore[assignment] # wrappers taking the same calls
    cpp_extension.load = load  # type: ignore[assignment]
    native.serve(guards.native_build, counter)
