"""What the coder is told about the target device: its name, SM count, memory bandwidth and peak throughput.

The name and SM count come from the device itself; bandwidth and peak come from a small table of data-center GPUs
(vendor datasheet figures: HBM bandwidth, dense BF16 tensor-core peak, no sparsity), matched on the device name.
A device the table does not know gets "unknown" figures rather than a guess.
"""

from __future__ import annotations

import re

from agents.prompting import DeviceFacts

# name fragment (lower case, most specific first) -> (memory bandwidth GB/s, dense BF16 TFLOP/s)
DATASHEET: tuple[tuple[str, float, float], ...] = (
    ("h200", 4800, 989),
    ("h100 sxm", 3350, 989),
    ("h100 80gb hbm3", 3350, 989),
    ("h100 pcie", 2000, 756),
    ("h100 nvl", 3900, 835),
    ("h100", 3350, 989),
    ("a100-sxm4-80gb", 2039, 312),
    ("a100 80gb pcie", 1935, 312),
    ("a100", 1555, 312),
    ("l40s", 864, 362),
    ("l4", 300, 121),
    ("a10g", 600, 70),
)


def facts_for(name: str, sm_count: int | None) -> DeviceFacts:
    key = name.lower()
    for fragment, bandwidth, peak in DATASHEET:
        if re.search(rf"(?<![a-z0-9]){re.escape(fragment)}(?![a-z0-9])", key):
            return DeviceFacts(name=name, sm_count=sm_count, memory_bandwidth_gbps=bandwidth, peak_tflops=peak)
    return DeviceFacts(name=name, sm_count=sm_count)


def local_device_facts(device: str = "auto") -> DeviceFacts:
    """The GPU this process would evaluate on, or the CPU stand-in (Triton's interpreter) where there is none."""
    import torch

    if device != "cpu" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        return facts_for(props.name, props.multi_processor_count)
    return DeviceFacts(name="CPU (no GPU here: kernels run under Triton's interpreter)")
