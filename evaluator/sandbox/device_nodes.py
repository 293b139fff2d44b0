"""Which /dev/nvidia* nodes a sandboxed worker sees: the control nodes (nvidiactl, nvidia-uvm, nvidia-modeset,
nvidia-caps) and only the numbered node of each GPU this process may use (CUDA_VISIBLE_DEVICES, as Ray sets it per
actor), so candidate code cannot open another actor's GPU behind CUDA_VISIBLE_DEVICES' back.

A GPU's node number is its NVML minor number, found by UUID (or by index under CUDA_DEVICE_ORDER=PCI_BUS_ID, NVML's
order). Where it cannot be found (no NVML, no CUDA_VISIBLE_DEVICES, an index in CUDA's own order) every node is bound,
as before, and `visible_minors` says so by returning None.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

_NUMBERED = re.compile(r"^nvidia(\d+)$")


def device_nodes(names: Iterable[str], minors: set[int] | None) -> list[str]:
    """The nodes (paths or names under /dev) to bind, given the minors allowed (None: all)."""
    kept = []
    for name in names:
        m = _NUMBERED.match(name.rsplit("/", 1)[-1])
        if m is None or minors is None or int(m.group(1)) in minors:
            kept.append(name)
    return kept


def visible_minors(nvml: Any, environ: Mapping[str, str]) -> set[int] | None:
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if nvml is None or visible is None:
        return None
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    try:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(int(nvml.nvmlDeviceGetCount()))]
        uuids = [_text(nvml.nvmlDeviceGetUUID(h)) for h in handles]
        minors: set[int] = set()
        for entry in entries:
            if entry.startswith(("GPU-", "MIG-")):
                matches = [h for h, u in zip(handles, uuids) if u.startswith(entry)]
                if len(matches) != 1:
                    return None
                handle = matches[0]
            elif entry.isdigit() and environ.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID" and int(entry) < len(handles):
                handle = handles[int(entry)]
            else:
                return None
            minors.add(int(nvml.nvmlDeviceGetMinorNumber(handle)))
        return minors
    except Exception:
        return None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
