"""The audit hook trusts code by the file its code object names, so a name is checked where code is made: a library
file's own source may be compiled under that file's name (the import system does, for a module without cached
bytecode), and nothing else may claim a library's name, whoever is on the stack. Run in a child process: an audit hook cannot be removed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent('''
    import json, sys, types, os
    from evaluator.worker import audit_hook
    refusals = []
    audit_hook.install(refusals, "candidate")
    library = os.__file__  # a trusted file: the standard library
    source = open(library, "rb").read()
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
    outcomes = {
        "own source, library name": attempt(lambda: compile(source, library, "exec")),
        "other source, library name": attempt(lambda: compile("x = 1", library, "exec")),
        "other source, frozen name": attempt(lambda: compile("x = 1", "<frozen os>", "exec")),
        "other source, own name": attempt(lambda: compile("x = 1", sys.argv[1], "exec")),
        "renamed to a library file": attempt(lambda: compile("1", "c", "eval").replace(co_filename=library)),
        "renamed to its own file": attempt(lambda: compile("1", "c", "eval").replace(co_filename=sys.argv[1])),
    }
    # Library code alone on a thread's stack (this script's own frame is untrusted too: it is "<string>"): a
    # candidate's finalizer or C code (map(compile, ...)) calls code makers with no frame of its own on the stack.
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(1) as pool:
        made = pool.submit(compile, "x = 1", library, "exec")
        outcomes["library alone, library name"] = "allowed" if made.exception() is None else "refused"
    print(json.dumps({"outcomes": outcomes, "refusals": refusals}))
''')


def test_only_a_librarys_own_source_may_claim_its_file_name(tmp_path):
    out = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "candidate.py")], capture_output=True,
                         text=True, cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["outcomes"] == {
        "own source, library name": "allowed",
        "other source, library name": "refused",
        "other source, frozen name": "refused",
        "other source, own name": "allowed",
        "renamed to a library file": "refused",
        "renamed to its own file": "allowed",
        "library alone, library name": "refused",  # whatever the stack
    }
    assert len(report["refusals"]) == 4 and all("library's file name" in r for r in report["refusals"])
