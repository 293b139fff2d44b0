"""The audit hook trusts a frame by the file its code names; a library's code object run with the candidate's globals
(`types.FunctionType`), a frame user whose module was patched, and a frame user called through a chain it does not
allow are candidate code all the same (`evaluator/worker/library_globals.py`). Library code alone on the stack (a finalizer
run from the harness's frames) gets no frames but a frame user's, and a frame user only for the calls its own code
makes (not a builtin that C calls for the candidate while the frame user is the nearest frame). The hook's cases run
in a child process: an audit hook cannot be removed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path

from evaluator.worker.library_globals import GenuineGlobals, ModuleFingerprint

ROOT = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent('''
    import json, sys, types
    import torch, torch._library.utils as library_utils, torch._jit_internal as jit_internal
    from evaluator.worker import audit_hook
    refusals = []
    audit_hook.install(refusals, "candidate")
    inspect_module = library_utils.inspect
    # The candidate's own code, named by a file outside every trusted root.
    untrusted = compile(
        "def attempt(how):\\n"
        "    try:\\n"
        "        how()\\n"
        "        return 'allowed'\\n"
        "    except RuntimeError:\\n"
        "        return 'refused'\\n", sys.argv[1], "exec")
    space = {}
    types.FunctionType(untrusted, space)()
    attempt = space["attempt"]

    class Spy:
        filename, lineno = "x", 0
        def getframeinfo(self, frame):
            return self

    def foreign_get_source():
        own = {"inspect": Spy(), "sys": types.SimpleNamespace(_getframe=sys._getframe)}
        types.FunctionType(library_utils.get_source.__code__, own)(1)

    def patched_get_source():
        library_utils.inspect = Spy()
        try:
            library_utils.get_source(1)
        finally:
            library_utils.inspect = inspect_module

    outcomes = {
        "frame user, its own globals": attempt(lambda: library_utils.get_source(1)),
        "typing's module name": attempt(lambda: __import__("typing").TypeVar("T")),
        "frame user, foreign globals": attempt(foreign_get_source),
        "frame user, module patched": attempt(patched_get_source),
        "frame user, module restored": attempt(lambda: library_utils.get_source(1)),
        "inspect through _jit_internal, called by the candidate":
            attempt(lambda: jit_internal.createResolutionCallbackFromFrame(1)),
        "traceback's text of the stack": attempt(lambda: __import__("traceback").format_stack()),
        "traceback's text with every local": attempt(lambda: __import__("traceback").StackSummary.extract(
            __import__("traceback").walk_stack(None), capture_locals=True)),
    }

    # Library code alone on a thread's stack: it gets no frames (the pool hands its result to whoever submitted it),
    # and none with foreign globals or a patched module either.
    from concurrent.futures import ThreadPoolExecutor
    outer = inspect_module.stack.__code__
    with ThreadPoolExecutor(1) as pool:
        plain = pool.submit(inspect_module.stack)
        spy = types.FunctionType(outer, {"sys": sys, "getouterframes": lambda f, c: f}, "stack", (1,))
        foreign = pool.submit(spy)
        outcomes["library alone, own globals"] = "allowed" if plain.exception() is None else "refused"
        outcomes["library alone, foreign globals"] = "allowed" if foreign.exception() is None else "refused"
        real = inspect_module.getouterframes
        inspect_module.getouterframes = lambda f, c: f
        try:
            patched = pool.submit(inspect_module.stack)
            outcomes["library alone, module patched"] = "allowed" if patched.exception() is None else "refused"
        finally:
            inspect_module.getouterframes = real

    # Finalizers run from the harness's frames, with no candidate frame on the stack: library code or a builtin they
    # call must not hand a frame to the candidate all the same.
    import collections, threading, traceback, weakref, torch._custom_op.impl as custom_op_impl
    sys.unraisablehook = lambda unraisable: None  # a refusal in a finalizer is reported there
    caught = []
    def tracer(frame, event, arg):
        caught.append(frame)
    def take(*frames):
        caught.extend(frames)
        raise StopIteration

    class Op:
        _impls = {}
        def _has_impl(self, kind):
            return False

    class Dropped:
        pass

    def finalized(func, *args):
        """'allowed' if a frame reached the candidate from a finalizer calling func(*args), run as a thread of the
        standard library's drops the last reference: library frames alone on the stack, like the harness's."""
        caught.clear()
        holder = [Dropped()]
        weakref.finalize(holder[0], func, *args)
        thread = threading.Thread(target=holder.clear)
        thread.start()
        thread.join()
        return "allowed" if caught else "refused"

    outcomes["finalizer: sys.settrace"] = finalized(sys.settrace, tracer)
    outcomes["finalizer: a map of sys._getframe"] = finalized(list, map(take, iter(sys._getframe, None)))
    outcomes["finalizer: a map of inspect.stack"] = finalized(list, map(take, iter(inspect_module.stack, None)))
    custom_op_impl.inspect = types.SimpleNamespace(getframeinfo=take)
    try:
        outcomes["finalizer: library code, its unfingerprinted module rebound"] = finalized(
            custom_op_impl.CustomOp._register_impl, Op(), "k", None, 1)
    finally:
        custom_op_impl.inspect = inspect_module
    caught.clear()
    def namedtuple_of_settrace():
        try:
            collections.namedtuple("X", map(sys.settrace, [tracer]))
        except (TypeError, ValueError):
            pass  # settrace returned None, no field name: the tracer is in all the same
    outcomes["frame user calling a builtin for the candidate"] = attempt(namedtuple_of_settrace)
    def raised_walk():
        try:
            raise ValueError
        except ValueError as error:
            list(getattr(traceback, "_walk_tb_with_full_positions")(error.__traceback__))
    outcomes["traceback's private walker"] = attempt(raised_walk)
    outcomes["traced"] = "allowed" if caught else "refused"
    print(json.dumps({"outcomes": outcomes, "refusals": refusals}))
''')


def test_library_code_counts_only_with_its_own_unpatched_globals(tmp_path):
    out = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "candidate.py")], capture_output=True,
                         text=True, cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["outcomes"] == {
        "frame user, its own globals": "allowed",
        "typing's module name": "allowed",
        "frame user, foreign globals": "refused",
        "frame user, module patched": "refused",
        "frame user, module restored": "allowed",
        "inspect through _jit_internal, called by the candidate": "refused",
        "traceback's text of the stack": "allowed",
        "traceback's text with every local": "refused",
        "library alone, own globals": "refused",
        "library alone, foreign globals": "refused",
        "library alone, module patched": "refused",
        "finalizer: sys.settrace": "refused",
        "finalizer: a map of sys._getframe": "refused",
        "finalizer: a map of inspect.stack": "refused",
        "finalizer: library code, its unfingerprinted module rebound": "refused",
        "frame user calling a builtin for the candidate": "refused",
        "traceback's private walker": "refused",
        "traced": "refused",
    }
    assert len(report["refusals"]) == 13, report["refusals"]
    assert all(any(event in r for event in ("sys._getframe", "sys.settrace", "tb_frame")) for r in report["refusals"])


def test_genuine_globals_are_module_dicts_only():
    genuine = GenuineGlobals()
    assert genuine.holds(vars(json), json.__file__, own=True)
    assert genuine.holds(vars(json), textwrap.__file__)  # another loaded module's dict: still a module's
    assert not genuine.holds(vars(json), textwrap.__file__, own=True)
    assert not genuine.holds(dict(vars(json)), json.__file__)  # a copy is the caller's own dict
    lazy = types.ModuleType("opforge_lazy_test")
    lazy.__file__ = json.__file__
    assert not genuine.holds(vars(lazy), json.__file__)  # not registered in sys.modules
    sys.modules["opforge_lazy_test"] = lazy
    try:
        assert not genuine.holds(vars(lazy), textwrap.__file__)  # named by other code
        assert genuine.holds(vars(lazy), json.__file__)  # a later import of that file
    finally:
        del sys.modules["opforge_lazy_test"]


def test_fingerprint_names_the_rebound_value():
    module = types.ModuleType("opforge_fingerprint_test")
    module.helper = len
    module.inner = textwrap
    module.count = 3
    fingerprint = ModuleFingerprint([module], lambda m: m is textwrap)
    assert fingerprint.changed() is None
    module.count = 4  # data may change
    assert fingerprint.changed() is None
    module.helper = print
    assert fingerprint.changed() == "opforge_fingerprint_test.helper"
    module.helper = len
    real = textwrap.dedent
    textwrap.dedent = print  # type: ignore[assignment]
    try:
        assert fingerprint.changed() == "textwrap.dedent"  # followed into the modules it holds
    finally:
        textwrap.dedent = real
    assert fingerprint.changed() is None


def test_fingerprint_leaves_warnings_hooks_to_catch_warnings():
    import warnings
    fingerprint = ModuleFingerprint([warnings], lambda m: False)
    with warnings.catch_warnings(record=True):
        assert fingerprint.changed() is None
    real = warnings.warn_explicit
    warnings.warn_explicit = print  # type: ignore[assignment]
    try:
        assert fingerprint.changed() == "warnings.warn_explicit"
    finally:
        warnings.warn_explicit = real
