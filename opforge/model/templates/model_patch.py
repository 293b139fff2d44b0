"""`patch(model)`: swap the model's optimised groups for this package's drop-in modules, in place.

model_groups.json (written by `opforge model export`) lists each group: the operator that serves it, the paths it
occupies in the model (a module, or a window `seq[i:j]` of an nn.Sequential's children), the constructor arguments of
the operator's module, and the shapes and dtypes of the parameters and buffers it was extracted with. A drop-in module
is built on the meta device and takes the model's own parameters by position (the same tensors: nothing is copied);
the window's other children become nn.Identity. Each call is then checked by the drop-in's dispatcher (device,
dtypes, sizes within those verified, contiguity) and falls back to the reference's PyTorch forward, with one
FallbackWarning per reason, wherever the kernel was not verified.

`hub_forward` is the same for the Kernel Hub layers (layers.py): it adopts the kernelized module's parameters into a
drop-in once (per module) and calls it; a module unlike the extracted one runs its own class's forward.
"""

from __future__ import annotations

import json
import re
import warnings
import weakref
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ._runtime import FallbackWarning
from .modules import MODULES

GROUPS: list[dict[str, Any]] = json.loads((Path(__file__).with_name("model_groups.json")).read_text(encoding="utf-8"))
_WINDOW = re.compile(r"^(?P<parent>.*)\[(?P<start>\d+):(?P<stop>\d+)\]$")
_adopted: "weakref.WeakKeyDictionary[nn.Module, nn.Module]" = weakref.WeakKeyDictionary()
_warned: set[str] = set()


def _state(module: nn.Module) -> list[torch.Tensor]:
    return [t for _, t in module.named_parameters()] + [t for _, t in module.named_buffers()]


def _fits(group: dict[str, Any], module: nn.Module) -> bool:
    got = [[list(t.shape), str(t.dtype).removeprefix("torch.")] for t in _state(module)]
    return got == group["state"]


def adopt(group: dict[str, Any], module: nn.Module) -> nn.Module:
    """The operator's drop-in module holding `module`'s parameters and buffers (the same tensors)."""
    with torch.device("meta"):
        dropin = MODULES[group["operator"]](*group["init_args"])
    names = [n for n, _ in dropin.named_parameters()] + [n for n, _ in dropin.named_buffers()]
    dropin.load_state_dict(dict(zip(names, _state(module), strict=True)), assign=True)
    return dropin.train(module.training)


def _say_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, FallbackWarning, stacklevel=3)


def patch(model: nn.Module) -> nn.Module:
    """Swap every group this package was exported for; groups whose parameters differ are left as they are (said
    once). Returns the model (changed in place)."""
    for group in GROUPS:
        for path in group["paths"]:
            window = _WINDOW.match(path)
            if window is None:
                parent_path, _, leaf = path.rpartition(".")
                parent = model.get_submodule(parent_path)
                target = parent.get_submodule(leaf)
                if not _fits(group, target):
                    _say_once(path, f"{path} is not the module the kernel was extracted from; left unpatched")
                    continue
                setattr(parent, leaf, adopt(group, target))
                continue
            seq = model.get_submodule(window["parent"])
            assert isinstance(seq, nn.Sequential)
            start, stop = int(window["start"]), int(window["stop"])
            chunk = nn.Sequential(*[seq[i] for i in range(start, stop)])
            if not _fits(group, chunk):
                _say_once(path, f"{path} is not the window the kernel was extracted from; left unpatched")
                continue
            seq[start] = adopt(group, chunk)
            for i in range(start + 1, stop):
                seq[i] = nn.Identity()
    return model


def hub_forward(operator: str, module: nn.Module, args: tuple[Any, ...]) -> Any:
    """The Kernel Hub layer's forward for `module` (a kernelized module of the user's class)."""
    dropin = _adopted.get(module)
    if dropin is None:
        group = next((g for g in GROUPS if g["operator"] == operator and _fits(g, module)), None)
        if group is None:
            _say_once(f"hub:{operator}", f"{type(module).__name__}: its parameters are not those the {operator} "
                                         f"kernel was extracted with; running its own forward")
            return type(module).forward(module, *args)
        dropin = adopt(group, module)
        _adopted[module] = dropin
    dropin.train(module.training)
    return dropin(*args)
