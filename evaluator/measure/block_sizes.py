"""The timing protocol's block sizes: the measurement (`measure/blocks.py`) times each side in blocks of these sizes, and the
driver's checks of the workers' clocks (`clock_checks.py`) judge the blocks it collected by them."""

from __future__ import annotations

MIN_BLOCKS = 3         # each side is timed in at least three blocks, alternating with the other side's
MIN_BLOCK_CALLS = 10   # a block ends on the stopping rule only after this many calls
