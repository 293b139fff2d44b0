"""Ray as users run it: a real cluster of three `ray start` nodes on this machine (a head without CPUs and two
one-CPU nodes, token authentication on, as `ray start --head` does by default), joined by `opforge optimize` as a
user would; one node is killed while it holds the evaluation, which is retried on the other; and a run whose worker
Ray cannot place says why.

The cluster lives in a temporary folder of its own ($RAY_TMPDIR, its own token file), so no other Ray on the machine
sees it, and every process it started is killed by id at the end."""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from evaluator import EvalConfig, Status, load_candidate, load_task
from evaluator.driver.ray_runner import RayRunner
from evaluator.driver.ray_cluster import ActorPlan, build_cpus, plan_actors
from opforge.run.config import RunConfig
from opforge.run.proposals import Proposing
from opforge.run.search import Progress, Search, SearchSettings
from opforge.run.start import Budget, start_run
from store import RunStatus, get_store

REPO = Path(__file__).resolve().parent.parent
TASK = Path(__file__).parent / "tasks" / "relu.py"
FAST = EvalConfig(max_timing_s=0.3, trials=1, profile=False, warmup_ms=5.0)


def test_actors_are_sized_from_the_cluster_and_leave_a_cpu_for_builds():
    assert plan_actors({"CPU": 2.0}, workers=2, owned=False) == ActorPlan(
        1, 1, 0, note="the Ray cluster has 2 CPUs: 1 evaluation worker rather than 2, keeping a CPU for builds")
    assert plan_actors({"CPU": 16.0}, workers=2, owned=False) == ActorPlan(2, 1, 0)
    assert plan_actors({"CPU": 4.0}, workers=2, owned=True) == ActorPlan(2, 1, 0)  # started with room for builds
    assert plan_actors({"CPU": 8.0, "GPU": 2.0}, workers=2, owned=False) == ActorPlan(2, 0, 1)
    one = plan_actors({"CPU": 1.0}, workers=2, owned=False)
    assert one.actors == 1 and build_cpus({"CPU": 1.0}, one) == 0  # a build then runs beside the actor
    assert build_cpus({"CPU": 2.0}, one) == 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _parent(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("PPid:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


class Cluster:
    def __init__(self) -> None:
        self.root = tempfile.mkdtemp(prefix="opf-ray-", dir="/tmp")  # short: Ray's socket paths must fit
        token = Path(self.root) / "auth_token"
        token.write_text(secrets.token_hex(32))
        base = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        self.env_without_auth = {**base, "RAY_TMPDIR": self.root, "PYTHONPATH": str(REPO)}
        self.env = {**self.env_without_auth, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.node_ports = [_free_port(), _free_port()]
        ray_cli = str(Path(sys.executable).with_name("ray"))
        self._start([ray_cli, "start", "--head", "--num-cpus=0", f"--port={self.port}", "--include-dashboard=false",
                     "--disable-usage-stats"])
        for port in self.node_ports:
            self._start([ray_cli, "start", f"--address={self.address}", "--num-cpus=1",
                         f"--node-manager-port={port}", "--disable-usage-stats"])

    def _start(self, argv: list[str]) -> None:
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    def raylet_of_port(self, port: int) -> int | None:
        return next((p for p in _pids() if "raylet" in _cmdline(p).split(" ")[0]
                     and f"--node_manager_port={port}" in _cmdline(p)), None)

    def processes(self) -> set[int]:
        """Every process the cluster started: those naming its folder, and their descendants."""
        mine = {p for p in _pids() if self.root in _cmdline(p)}
        grew = True
        while grew:
            children = {p for p in _pids() if _parent(p) in mine} - mine
            grew = bool(children)
            mine |= children
        return mine

    def stop(self) -> None:
        for _ in range(5):
            left = self.processes() - {os.getpid()}
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.5)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster():
    c = Cluster()
    try:
        yield c
    finally:
        c.stop()


def _opforge(cluster: Cluster, env: dict[str, str], *args: str, timeout_s: float = 600) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "opforge", *args], cwd=cluster.root, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.slow
def test_joining_a_token_cluster_without_the_token_mode_says_what_to_set(cluster):
    proc = _opforge(cluster, cluster.env_without_auth, "optimize", "relu", "--ray-address", cluster.address,
                    "--budget", "1", "--db", f"sqlite:///{cluster.root}/auth.db")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert "RAY_AUTH_MODE=token" in last and cluster.address in last, err[-3000:]


@pytest.mark.slow
def test_a_run_joins_the_local_cluster_and_survives_losing_the_node_that_evaluates(cluster):
    db = f"sqlite:///{cluster.root}/runs.db"
    # No --ray-address: the cluster `ray start` left running on this machine is joined, not refused.
    proc = _opforge(cluster, cluster.env, "optimize", "relu", "--budget", "2", "--confirm", "0", "--timing-s", "0.3",
                    "--workers", "2", "--db", db)
    killed: list[int] = []
    deadline = time.monotonic() + 400
    while not killed and proc.poll() is None and time.monotonic() < deadline:
        for pid in _pids():
            if not _cmdline(pid).startswith("ray::EvaluatorActor"):
                continue
            raylet = _parent(pid)
            if raylet in {cluster.raylet_of_port(p) for p in cluster.node_ports}:
                for victim in (raylet, pid):  # the node goes, with everything on it
                    os.kill(victim, signal.SIGKILL)
                killed.append(raylet)
                break
        time.sleep(0.1)
    out, err = proc.communicate(timeout=600)
    assert killed, "no evaluation actor was seen on a worker node: " + err[-3000:]
    assert proc.returncode == 0, err[-4000:]
    assert "1 evaluation worker rather than 2, keeping a CPU for builds" in err
    assert "an evaluation worker was lost" in err and "retrying on a fresh one" in err, err[-4000:]
    store = get_store(db)
    try:
        [run] = store.list_runs()
        history = store.history(run.id)
        assert len(history) == 2
        assert all(sc.evaluation is not None and sc.evaluation.result.status == Status.OK for sc in history), [
            sc.evaluation.result.reason for sc in history if sc.evaluation is not None]
        assert store.run_totals(run.id).by_status == {Status.OK.value: 2}
    finally:
        store.close()


class _Clock:
    """Thirty seconds pass at every reading: the search sees a minute without a verdict at once."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 30.0
        return self.now


@pytest.mark.slow
def test_a_worker_ray_cannot_place_is_explained_and_a_shutdown_is_not_a_verdict(tmp_path):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=0, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False,
             object_store_memory=128 * 2**20)
    store = get_store(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        runner = RayRunner(workers=1)
        from agents.tuner import TuneProposer
        from benchmarks import builtin_task, seed_for

        task = load_task(TASK)
        budget = Budget(1)
        run = start_run(store, task, load_candidate(seed_for(builtin_task("relu")), origin="seed"), RunConfig(),
                        budget)
        seen: list[Progress] = []
        stalled = threading.Event()

        def on_progress(p: Progress) -> None:
            seen.append(p)
            if p.event == "stalled":
                stalled.set()

        search = Search(store, run.id, task, Proposing(TuneProposer(seed=3), oversample=1), runner,
                        SearchSettings(FAST, budget), on_progress=on_progress,
                        should_stop=lambda: "asked to stop" if stalled.is_set() else None, clock=_Clock())
        outcome: list[object] = []
        thread = threading.Thread(target=lambda: outcome.append(search.run()), daemon=True)
        thread.start()
        assert stalled.wait(120), [p.event for p in seen]
        runner.close()  # the evaluation in flight is lost to the shutdown: requeued, never a verdict
        thread.join(120)
        [result] = outcome
        note = next(p.note for p in seen if p.event == "stalled")
        assert "for Ray to place it" in note and "0 CPUs free" in note, note
        assert result.status == RunStatus.INTERRUPTED  # type: ignore[attr-defined]
        assert store.history(run.id)[0].evaluation is None
        assert store.run_totals(run.id).faults == 1
    finally:
        store.close()
        ray.shutdown()
