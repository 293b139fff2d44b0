"""What runs in a worker's process: the zygote, the command loop, the timer, the checks around each call, the guards.

The reference's worker runs no candidate code; the candidate's worker runs these modules beside candidate code that can rewrite any memory of its process, so nothing computed here is trusted on its own: the driver checks what matters from outside (`evaluator.measure.blocks`, `evaluator.verify`). These modules import nothing of `driver`, `measure`, `verify` or `profile` (`tests/test_layering.py`), and every one loaded in the candidate's worker is fingerprinted by its guards.
"""
