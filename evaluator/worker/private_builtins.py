"""The builtins the harness's own code looks up in a worker: a private copy, taken when the zygote imports the
evaluator, before any candidate code runs (issue 33, class 7).

A candidate can replace a builtin (`len`, `vars`, `isinstance`...) through any function's `__self__` and have the
replacement do deferred work the first time the harness calls it after a timed call's end mark, then put the
original back: the check of the builtins itself looked `vars`, `len`, `all`, `map` and `zip` up by name, so a hook on
one of those ran inside the check and left nothing to find. The modules whose code runs between a call's end mark
and that check (`timing.py`, `timed_calls.py`, `worker/loop.py`, `call_checks.py`, `guards.py`) bind `__builtins__` to
this copy at their top, so every function they define looks its builtins up here, never in the `builtins` module a
candidate can reach; the check then runs first after the end mark and finds a replacement still in place. The copy
itself is fingerprinted with the real builtins (`Guards.builtins_changed`): a candidate that reached it through a
harness function's `__builtins__` and changed it is refused too.
"""

from __future__ import annotations

import builtins

BUILTINS: dict[str, object] = dict(vars(builtins))
