"""Suite-wide checks that name the test which broke the test process's shared state."""

from __future__ import annotations

import sys

import pytest


@pytest.fixture(autouse=True)
def subnormals_survive():
    """A shared library linked with the fast-math start file sets the FPU's flush-to-zero bits for the whole process
    that loads it; every later test would then compute differently (hypothesis refuses to draw floats at all). Fail
    the test that did it, by name, instead of a distant one."""
    yield
    tiny = float(sys.float_info.min)  # the smallest normal double: halving it gives a subnormal unless FTZ is on
    assert tiny / 2 != 0.0, "this test left the process flushing subnormal floats to zero (a fast-math library load?)"
