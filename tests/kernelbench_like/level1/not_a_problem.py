"""A fixture for the folder lister: a .py file beside the problems that is not one (no Model, no get_inputs), as
KernelBench checkouts hold; `benchmarks.kernelbench.problems` must skip it."""

SCALE = 2.0
