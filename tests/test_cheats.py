"""The adversarial cases that run alone (tests/conftest.py, SERIAL_FILES): the cheats whose refusal rests on a clock,
a CPU account or other work on the cores (a timer that lags, threads busy between calls, a reference slowed from the
candidate's process), which other work beside them could skew, and the honest kernels that must pass those same
checks. Every case without `beside: true` in its header is here; the header's format and the checks are in
`cheat_cases.py`, and the cases that may run beside other work in `test_cheats_beside.py`."""

from __future__ import annotations

import pytest

from cheat_cases import (  # noqa: F401 - lean_zygotes is a fixture
    CHEATS, HONEST, Header, alone, check_honest, check_lean, check_refused, lean, lean_zygotes,
)


@pytest.mark.parametrize("header", alone(CHEATS), ids=lambda h: h.path.stem)
def test_cheat_is_refused(header: Header, monkeypatch: pytest.MonkeyPatch):
    check_refused(header, monkeypatch)


@pytest.mark.parametrize("header", alone(HONEST), ids=lambda h: h.path.stem)
def test_honest_candidate(header: Header, monkeypatch: pytest.MonkeyPatch):
    check_honest(header, monkeypatch)


@pytest.mark.parametrize("header", lean(alone(CHEATS)) + lean(alone(HONEST)), ids=lambda h: h.path.stem)
def test_a_native_case_gets_the_same_verdict_from_a_zygote_without_dynamo(header: Header, lean_zygotes,
                                                                          monkeypatch: pytest.MonkeyPatch):
    check_lean(header, lean_zygotes, monkeypatch)
