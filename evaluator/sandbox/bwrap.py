"""bubblewrap: whether it makes namespaces here, and the command prefix of a worker's view (read-only root, private
/tmp, home directories hidden, the Python installation and the project bound back, the GPU's device nodes)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from evaluator.device.rules import rules
from evaluator.sandbox.zygote_env import PROJECT_ROOT


@functools.lru_cache(maxsize=1)
def bwrap_available() -> bool:
    exe = shutil.which("bwrap")
    if not exe:
        return False
    try:
        probe = subprocess.run([exe, "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--dev", "/dev",
                                "--proc", "/proc", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def bwrap_prefix(device: str, hidden_extra: tuple[str, ...] = ()) -> list[str]:
    args = ["bwrap", "--ro-bind", "/", "/", "--tmpfs", "/tmp", "--dev", "/dev", "--proc", "/proc",
            "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session"]
    home = Path(os.path.expanduser("~"))
    hidden = [Path("/tmp")] + [p for p in (home, Path("/home"), Path("/root")) if p.is_dir() and p != Path("/")]
    for h in dict.fromkeys(hidden[1:]):
        args += ["--tmpfs", str(h)]
    # The Python installation, its site-packages and the project are bound back read-only where they live under a
    # hidden folder (a virtualenv in the home directory, a checkout under /tmp, ...).
    needed = {Path(sys.prefix), Path(sys.base_prefix), PROJECT_ROOT, *(Path(p) for p in sys.path[1:] if p)}
    bound: list[Path] = []
    for p in sorted(needed, key=lambda q: len(q.parts)):
        if p.exists() and any(under(p, h) for h in hidden) and not any(under(p, b) for b in bound):
            args += ["--ro-bind", str(p), str(p)]
            bound.append(p)
    for extra in map(Path, hidden_extra):  # e.g. the CUDA build cache: candidate code never sees it, even read-only
        if extra.is_dir() and not any(under(n, extra) for n in needed):
            args += ["--tmpfs", str(extra)]
    if rules(device).device_nodes:
        from evaluator.sandbox.device_nodes import device_nodes, visible_minors
        from evaluator.device.nvml import load_nvml
        for dev in device_nodes(sorted(str(p) for p in Path("/dev").glob("nvidia*")),
                                visible_minors(load_nvml(), os.environ)):
            args += ["--dev-bind", dev, dev]
    return args + ["--"]


def under(p: Path, root: Path) -> bool:
    """Whether `p` lies within `root` (both resolved)."""
    try:
        p.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False
