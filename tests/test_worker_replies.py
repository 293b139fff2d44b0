"""The driver's parse of a worker's replies (`replies.parse`) and of a build's verdict (`commands.Built`):
every kind the worker sends comes back typed, and whatever does not fit a kind is refused with one sentence."""

from __future__ import annotations

import json
import math
import socket
from types import SimpleNamespace
from typing import Any

import pytest

from evaluator.wire import replies
from evaluator.wire.build_verdict import BuildKind, BuildVerdict
from evaluator.wire.commands import Built, UnknownCommand, parse_as
from evaluator.wire.commands import parse as parse_command
from evaluator.result import Status
from evaluator.wire.replies import MalformedReply, parse

# One header of each kind, as the worker sends it (after the JSON round trip of the channel), and what it parses to.
ROUND_TRIPS: list[tuple[dict[str, Any], object]] = [
    ({"status": "ready", "variants": 2, "sizes": [{"input_bytes": 4, "weight_bytes": 8}],
      "variant_overrides": [{"n": "4"}, {"n": "8"}], "tolerance": {"atol": 1e-3}, "interpreter_shape": {"n": "2"}},
     replies.Ready(variants=2, sizes=({"input_bytes": 4, "weight_bytes": 8},), variant_overrides=({"n": "4"},
                   {"n": "8"}), tolerance={"atol": 1e-3}, interpreter_shape={"n": "2"})),
    ({"status": "ready", "variants": 1, "threads": 3}, replies.Ready(variants=1, threads=3)),
    ({"status": "build", "spec": {"name": "ext"}, "kind": "native", "threads": 2},
     replies.BuildRequest(spec={"name": "ext"}, kind=BuildKind.NATIVE, threads=2)),
    ({"status": "ran", "ops": ["aten::relu"], "outputs": [{"shape": [2], "dtype": "float32"}], "notes": ["n"],
      "peak_memory_bytes": 64, "launches": 1, "kernels": {"triton:k": 1}, "torch_work": 0, "torch_ops": []},
     replies.Ran(ops=("aten::relu",), outputs=({"shape": [2], "dtype": "float32"},), notes=("n",),
                 peak_memory_bytes=64, launches=1, kernels={"triton:k": 1}, torch_work=0, torch_ops=())),
    ({"status": "ran"}, replies.Ran()),
    ({"status": "no-exact", "reason": "no double kernel"}, replies.NoExact("no double kernel")),
    ({"status": "armed"}, replies.Armed()),
    ({"status": "armed", "inputs": [{"offset": 0}]}, replies.Armed(inputs=({"offset": 0},))),
    ({"status": "drawn", "inputs": None}, replies.Drawn()),
    ({"status": "rep", "ms": 0.25, "outputs": {"spans": []}}, replies.Rep(ms=0.25, outputs={"spans": []})),
    ({"status": "timed", "kernels": {"k": 2}, "left_running_ms": 0.5}, replies.Timed({"k": 2}, 0.5)),
    ({"status": "looped", "calls": 12}, replies.Looped(12)),
    ({"status": "clock", "now_ms": 1234.5}, replies.ClockRead(1234.5)),
    ({"status": "profiled", "profile": {"self_cuda_ms": 0.1}}, replies.Profiled({"self_cuda_ms": 0.1})),
    ({"status": "batched"}, replies.Batched()),
    ({"status": "checked"}, replies.Checked()),
    ({"status": "called"}, replies.Called()),
    ({"status": "measured"}, replies.Measured()),
    ({"status": "rejected", "reason": "tampered", "log": "trace"}, replies.Failed(Status.REJECTED, "tampered", "trace")),
    ({"status": "compile_error", "reason": "no ModelNew"}, replies.Failed(Status.COMPILE_ERROR, "no ModelNew")),
    ({"status": "task_error", "reason": "bad task"}, replies.TaskFailed("bad task")),
]


@pytest.mark.parametrize("header, expected", ROUND_TRIPS, ids=[h["status"] for h, _ in ROUND_TRIPS])
def test_each_kind_of_reply_parses_to_its_type_with_its_fields(header, expected):
    wired = json.loads(json.dumps({**header, "nonce": "n"}))  # as the channel hands it over, nonce and all
    got = parse(wired)
    assert got == expected and type(got) is type(expected)
    assert replies.status_of(got) == header["status"]


def test_every_declared_kind_is_covered_by_a_round_trip():
    kinds = {type(r) for _, r in ROUND_TRIPS}
    assert kinds == set(replies.Reply.__args__)  # type: ignore[attr-defined]


def _refused(header: dict[str, Any]) -> str:
    with pytest.raises(MalformedReply) as exc:
        parse(header)
    sentence = str(exc.value)
    assert sentence and "\n" not in sentence and len(sentence) < 300  # one readable sentence
    return sentence


@pytest.mark.parametrize("header, says", [
    ({"status": "done"}, "unknown status 'done'"),
    ({"status": "ok", "reason": "trust me"}, "unknown status 'ok'"),  # a verdict only the driver reaches
    ({"variants": 1}, "without a status"),
    ({"status": 3}, "without a status"),
    ({"status": "ready"}, "'variants' is missing"),
    ({"status": "looped"}, "'calls' is missing"),
    ({"status": "clock"}, "'now_ms' is missing"),
    ({"status": "rep", "outputs": {}}, "'ms' is missing"),
    ({"status": "build", "kind": "cuda"}, "'spec' is missing"),
])
def test_an_unknown_status_or_a_missing_field_is_refused(header, says):
    assert says in _refused(header)


@pytest.mark.parametrize("header, field", [
    ({"status": "ready", "variants": "2"}, "variants"),
    ({"status": "ready", "variants": True}, "variants"),
    ({"status": "ready", "variants": -1}, "variants"),
    ({"status": "ready", "variants": 1, "threads": 2.5}, "threads"),
    ({"status": "ready", "variants": 1, "tolerance": {"atol": "big"}}, "tolerance"),
    ({"status": "ready", "variants": 1, "variant_overrides": [{"n": 4}]}, "variant_overrides"),
    ({"status": "ready", "variants": 1, "sizes": [1, 2]}, "sizes"),
    ({"status": "build", "spec": "sources", "kind": "cuda"}, "spec"),
    ({"status": "build", "spec": {}, "kind": "rust"}, "kind"),
    ({"status": "ran", "ops": "aten::relu"}, "ops"),
    ({"status": "ran", "launches": 2**70}, "launches"),
    ({"status": "ran", "kernels": {"k": "1"}}, "kernels"),
    ({"status": "ran", "torch_ops": [1]}, "torch_ops"),
    ({"status": "rep", "ms": "0.1"}, "ms"),
    ({"status": "timed", "kernels": [], "left_running_ms": 0.0}, "kernels"),
    ({"status": "looped", "calls": 1.0}, "calls"),
    ({"status": "profiled", "profile": {"ms": None}}, "profile"),
    ({"status": "rejected", "reason": ["a", "list"]}, "reason"),
])
def test_a_field_of_the_wrong_type_is_refused_by_name(header, field):
    assert repr(field) in _refused(header)


@pytest.mark.parametrize("header, field", [
    ({"status": "rep", "ms": math.nan}, "ms"),
    ({"status": "rep", "ms": math.inf}, "ms"),
    ({"status": "rep", "ms": -0.5}, "ms"),  # a call cannot take less than no time
    ({"status": "clock", "now_ms": math.nan}, "now_ms"),
    ({"status": "timed", "left_running_ms": -math.inf}, "left_running_ms"),
    ({"status": "profiled", "profile": {"self_cuda_ms": math.inf}}, "profile"),
    ({"status": "ready", "variants": 1, "tolerance": {"atol": math.nan}}, "tolerance"),
])
def test_a_time_or_figure_that_is_not_finite_is_refused(header, field):
    assert repr(field) in _refused(header)


@pytest.mark.parametrize("header, field", [
    ({"status": "rejected", "reason": "x" * (replies.MAX_REASON_CHARS + 1)}, "reason"),
    ({"status": "compile_error", "reason": "", "log": "x" * (replies.MAX_LOG_CHARS + 1)}, "log"),
    ({"status": "no-exact", "reason": "x" * (replies.MAX_REASON_CHARS + 1)}, "reason"),
    ({"status": "ran", "ops": ["x" * (replies.MAX_NAME_CHARS + 1)]}, "ops"),
    ({"status": "ran", "kernels": {"k" * (replies.MAX_NAME_CHARS + 1): 1}}, "kernels"),
    ({"status": "ran", "notes": ["n"] * (replies.MAX_ITEMS + 1)}, "notes"),
])
def test_an_over_long_string_or_list_is_refused(header, field):
    assert repr(field) in _refused(header)


def test_a_field_the_kind_does_not_have_is_refused():
    assert "unknown field 'speedup'" in _refused({"status": "checked", "speedup": 100})
    assert "unknown field 'ms'" in _refused({"status": "armed", "ms": 0.1})


def test_the_reply_at_the_bound_is_still_accepted():
    """The bounds refuse what is over them, not what reaches them (a long compiler log is a compile error)."""
    reply = parse({"status": "compile_error", "reason": "r" * replies.MAX_REASON_CHARS,
                   "log": "l" * replies.MAX_LOG_CHARS})
    assert isinstance(reply, replies.Failed) and len(reply.log) == replies.MAX_LOG_CHARS


def _connection(role: str = "candidate") -> tuple[Any, socket.socket]:
    from evaluator.driver.connection import WorkerConnection
    from evaluator.wire.output_slot import DriverSlot
    ours, theirs = socket.socketpair()
    handle = SimpleNamespace(sock=ours, outputs=DriverSlot(), log_text=lambda: "")
    conn = WorkerConnection(SimpleNamespace(dynamo=True), handle, "n" * 32, role, "relu")  # type: ignore[arg-type]
    return conn, theirs


def test_the_connection_refuses_a_malformed_reply_as_the_candidates_protocol_failure():
    from evaluator.driver.connection import Refused
    from evaluator.wire.frames import Channel
    conn, theirs = _connection()
    Channel(theirs, "n" * 32).send({"status": "rep", "ms": float("nan")})
    with pytest.raises(Refused) as refused:
        conn.recv(5.0, "a timed call")
    assert refused.value.status == Status.REJECTED
    assert refused.value.reason.startswith("the candidate process sent a malformed reply while a timed call: ")
    assert "'ms' is not a finite number" in refused.value.reason


def test_the_connection_refuses_a_reply_of_another_kind_than_asked():
    from evaluator.driver.connection import Refused
    from evaluator.wire.frames import Channel
    conn, theirs = _connection()
    Channel(theirs, "n" * 32).send({"status": "checked"})
    with pytest.raises(Refused, match="answered 'checked' where it was to answer 'armed'"):
        conn.recv_as(replies.Armed, 5.0, "drawing a timed call's inputs")
    Channel(theirs, "n" * 32).send({"status": "armed"})
    armed, _ = conn.recv_as(replies.Armed, 5.0, "drawing a timed call's inputs")
    assert armed == replies.Armed()


def test_the_references_malformed_reply_is_the_tasks_error():
    from evaluator.task import TaskError
    from evaluator.wire.frames import Channel
    conn, theirs = _connection("reference")
    Channel(theirs, "n" * 32).send({"status": "ready", "variants": "many"})
    with pytest.raises(TaskError, match="the reference process sent a malformed reply while loading"):
        conn.recv(5.0, "loading")


# -- the build verdict -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("verdict", list(BuildVerdict))
def test_each_build_verdict_round_trips_through_the_drivers_answer(verdict):
    built = Built(verdict, "log", "key", cached=True)
    parsed = parse_as(json.loads(json.dumps({**built.to_wire(), "nonce": "n"})), Built, "a build's answer")
    assert parsed == built and parsed.verdict is verdict


def test_a_build_verdict_outside_the_list_is_refused():
    with pytest.raises(UnknownCommand, match="'built'.*'linkd' is not a valid BuildVerdict"):
        parse_command({"cmd": "built", "verdict": "linkd"})
    with pytest.raises(ValueError):
        Built("ok")  # type: ignore[arg-type] # the driver's own slip is caught where it is made


def test_the_three_build_clients_read_the_typed_verdict():
    """CUDA, CPU extension and load_c: a refusal's log reaches the candidate's error, whichever build it was."""
    from evaluator.build import cpu_extension
    from evaluator.build import cuda as cuda_build
    from evaluator.worker.guards import Guards
    from evaluator.build.native_build import NativeBuildError

    refused = Built(BuildVerdict.REFUSED, "the driver said no")
    with pytest.raises(cuda_build.CompileFailed, match="the driver said no"):
        cuda_build.prebuilt(lambda spec: (refused, []), "check", False, False, "ext", "int f();",
                            "__global__ void k() {}", {"functions": ["f"]})
    with pytest.raises(cpu_extension.CpuBuildFailed, match="the driver said no"):
        cpu_extension.prebuilt(lambda spec, kind: (refused, []), False, "ext", "int f() { return 1; }",
                               {"functions": ["f"]})
    guards = Guards()
    guards.build_client = lambda spec, kind: (Built(BuildVerdict.COMPILE_ERROR, "error: x"), [])
    with pytest.raises(NativeBuildError, match="error: x"):
        guards.native_build(SimpleNamespace(name="lib", to_json=lambda: {}))
    guards.build_client = lambda spec, kind: (Built(BuildVerdict.TIMEOUT), [])
    with pytest.raises(NativeBuildError, match=r"could not be built \(timeout\)"):
        guards.native_build(SimpleNamespace(name="lib", to_json=lambda: {}))
