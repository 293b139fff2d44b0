"""`opforge model`: from a user's whole model to the operators worth optimising, and back to a patched model.

    profile  (profiling.py)  run the model, time every module and Sequential window, list the hot ATen ops
    extract  (extraction.py) each hot group as a KernelBench task at the model's shapes; groups that compute what a
                             built-in task computes (matching.py) reuse its seed kernel
    export   (packaging.py)  the bench's best kernels as one package: `patch(model)` and the Kernel Hub layout

`loading` reads the model file, `groups` captures each module's inputs, outputs and time in one pass.
"""

from opforge.model.loading import LoadedModel, ModelError, load_model

__all__ = ["LoadedModel", "ModelError", "load_model"]
