"""Reading a model file: `get_model()` or a KernelBench-style `Model` with `get_init_inputs()`, and `get_inputs()`.

The file is the user's own code and runs in this process (unlike a candidate kernel, it is not hostile here). The
model is built under a fixed seed and put in eval mode: the profile, the extracted tasks and the end-to-end bench
all see the inference forward.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import nn


class ModelError(Exception):
    """A model file that cannot be used; the message is one sentence naming the file and what to do."""


@dataclass(frozen=True)
class LoadedModel:
    path: Path
    module: ModuleType
    model: nn.Module
    inputs: tuple[Any, ...]

    def fresh_inputs(self, seed: int) -> tuple[Any, ...]:
        """Another draw of `get_inputs()` (the bench's fresh inputs)."""
        torch.manual_seed(seed)
        return tuple(self.module.get_inputs())


def load_module(path: Path) -> ModuleType:
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"{path} is not a file; give the path of a Python file defining the model.")
    name = f"opforge_user_model_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ModelError(f"{path} cannot be imported as Python; give a .py file.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's file: any failure is reported as one sentence
        sys.modules.pop(name, None)
        raise ModelError(f"{path} failed to import ({type(exc).__name__}: {exc}); fix the file and retry.") from None
    return module


def load_model(path: Path, seed: int = 0) -> LoadedModel:
    module = load_module(path)
    if not callable(getattr(module, "get_inputs", None)):
        raise ModelError(f"{path} has no get_inputs(); add one returning the forward's example arguments.")
    torch.manual_seed(seed)
    try:
        if callable(getattr(module, "get_model", None)):
            model = module.get_model()
        elif isinstance(getattr(module, "Model", None), type):
            init = module.get_init_inputs() if callable(getattr(module, "get_init_inputs", None)) else []
            model = module.Model(*init)
        else:
            raise ModelError(f"{path} defines neither get_model() nor a class Model; add one of them.")
        inputs = tuple(module.get_inputs())
    except ModelError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise ModelError(f"{path}: building the model or its inputs failed ({type(exc).__name__}: {exc}).") from None
    if not isinstance(model, nn.Module):
        raise ModelError(f"{path}: the model is a {type(model).__name__}, not a torch.nn.Module.")
    model.eval()
    return LoadedModel(path=Path(path), module=module, model=model, inputs=inputs)
