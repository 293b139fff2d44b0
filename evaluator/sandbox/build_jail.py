"""The build stage's sandbox without bubblewrap: a compiler started through this script runs with no more rights than
the candidate it builds for.

    python -I -S evaluator/sandbox/build_jail.py WORK [READABLE ...] -- COMPILER ARGS...

A candidate's sources are untrusted input to the compiler: `#include "/any/path"`, `.incbin "/any/path"` in inline
assembly, a flag naming a plugin. Without bubblewrap the compiler used to run as the driver, reading whatever the
driver may (the store, `~/.ssh`, other builds' cache entries in /tmp or ~/.cache). Here, before the compiler is
exec'd, this process takes:
- a network and IPC namespace of its own (`process_tree.isolate_network`);
- no capabilities and no way back to them (a root driver's compiler cannot read past file modes either);
- Landlock's rules (`landlock.restrict`): writes only below WORK, reads and execution only below WORK and the READABLE
  paths (the toolchain, the headers: `read_view.build_reads`);
- the candidate worker's syscall filter (`syscall_filter.install`): no Unix socket, no System V IPC, no io_uring.
All of it is inherited by the compiler and every program it starts (cc1, as, ld). Where Landlock is missing, the
script refuses (exit status 97), so that the build stage's self-test fails and no build runs unconfined.

Run as a script with `-I -S` (no site-packages, no environment), importing only the three standard-library-only
modules beside it: it starts in about 20 ms, where importing the evaluator package would load torch.
"""

from __future__ import annotations

import os
import sys

REFUSED = 97


def main(argv: list[str]) -> None:
    if "--" not in argv or argv.index("--") < 1 or argv.index("--") == len(argv) - 1:
        sys.exit("usage: build_jail.py WORK [READABLE ...] -- COMMAND ...")
    split = argv.index("--")
    work, readable, command = argv[0], tuple(argv[1:split]), argv[split + 1:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import landlock
    import process_tree
    import syscall_filter
    process_tree.isolate_network()  # where the kernel refuses, the syscall filter still shuts Unix sockets and IPC
    process_tree.drop_capabilities()
    problem = landlock.restrict((work,), readable=readable)
    if problem is not None:
        print(f"opforge: the build stage's sandbox cannot start here: {problem}", file=sys.stderr)
        os._exit(REFUSED)
    if not syscall_filter.install(processes=True, reach=True):
        print("opforge: the build stage's syscall filter cannot be installed here", file=sys.stderr)
        os._exit(REFUSED)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"opforge: {command[0]} could not run: {exc}", file=sys.stderr)
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
