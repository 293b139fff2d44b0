"""Where `RayRunner` runs: a Ray it starts itself, a cluster already running on this machine, or one at an address;
and how many evaluation actors that cluster can hold while leaving a CPU to the build tasks.

Joining: `address` (or $RAY_ADDRESS) joins that cluster; without one, a cluster already started on this machine
(`ray start --head`) is joined rather than refused (Ray refuses to start a second one with our CPU count). Ray 2.5x
turns on token authentication for clusters that `ray start` makes: a driver joining one needs `RAY_AUTH_MODE=token`
in its environment (and the token in ~/.ray/auth_token or $RAY_AUTH_TOKEN), as does every `ray start --address`.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from typing import Any

RAY_OBJECT_STORE_BYTES = 128 * 2**20
RAY_PROBE_TIMEOUT_S = 5.0
BUILD_CPUS = 2                   # extra CPUs of a locally started Ray for build tasks (actors hold one CPU each)
AUTH_HINT = ("if the cluster was started with `ray start`, set RAY_AUTH_MODE=token for opforge (and for every "
             "`ray start --address`), with the cluster's token in ~/.ray/auth_token or $RAY_AUTH_TOKEN")


@dataclass(frozen=True, slots=True)
class Joined:
    """How this process is attached to Ray: `owned` when it started Ray itself (and shuts it down)."""

    owned: bool
    where: str                   # "a local Ray", "the Ray cluster already running here", "the Ray cluster at X"


def connect(ray: Any, workers: int, address: str | None) -> Joined:
    """Start or join Ray (see the module's docstring); raises ConnectionError with one sentence when it cannot."""
    common: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.ERROR, "log_to_driver": False}
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address:
        probe_ray_address(address)
        _join(ray, address, f"the Ray cluster at {address}", common)
        return Joined(False, f"the Ray cluster at {address}")
    try:
        ray.init(num_cpus=workers + BUILD_CPUS, object_store_memory=RAY_OBJECT_STORE_BYTES, **common)
        return Joined(True, "a local Ray")
    except ValueError as exc:
        if "existing cluster" not in str(exc):
            raise
    # A cluster runs on this machine already (`ray start --head`): use it as it is sized.
    _join(ray, "auto", "the Ray cluster already running on this machine", common)
    return Joined(False, "the Ray cluster already running on this machine")


def _join(ray: Any, address: str, where: str, common: dict[str, Any]) -> None:
    try:
        ray.init(address=address, **common)
    except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError, AuthenticationError, RuntimeError...
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), exc.__class__.__name__)
        hint = f"; {AUTH_HINT}" if os.environ.get("RAY_AUTH_MODE") != "token" else ""
        raise ConnectionError(f"cannot join {where} ({first}){hint}") from None


@dataclass(frozen=True, slots=True)
class ActorPlan:
    """How many evaluation actors to run and what each asks Ray for; `note` says so when it is not what was asked."""

    actors: int
    actor_cpus: int              # 1 on a CPU cluster; 0 with GPUs (the evaluator's processes do the CPU work)
    actor_gpus: int
    note: str = ""


def plan_actors(cluster: dict[str, float], workers: int, owned: bool) -> ActorPlan:
    """One actor per GPU where the cluster has GPUs; otherwise `workers` CPU actors, but on a cluster opforge did
    not size itself at most its CPUs less one, so that a build task always finds a CPU."""
    gpus = int(cluster.get("GPU", 0))
    if gpus:
        return ActorPlan(gpus, 0, 1)
    cpus = int(cluster.get("CPU", 0))
    if owned or cpus - 1 >= workers:
        return ActorPlan(workers, 1, 0)
    actors = max(1, cpus - 1)
    return ActorPlan(actors, 1, 0, note=f"the Ray cluster has {cpus} CPU{'s' if cpus != 1 else ''}: {actors} "
                                        f"evaluation worker{'s' if actors != 1 else ''} rather than {workers}, "
                                        "keeping a CPU for builds")


def build_cpus(cluster: dict[str, float], plan: ActorPlan) -> int:
    """What a build task asks for now: one CPU where the live nodes have one beyond the actors', else none (it then
    runs beside an actor rather than waiting for a CPU that will not come, e.g. after a node was lost)."""
    return 1 if int(cluster.get("CPU", 0)) - plan.actors * plan.actor_cpus >= 1 else 0


def probe_ray_address(address: str, timeout_s: float = RAY_PROBE_TIMEOUT_S) -> None:
    """Fail fast where nothing listens at a cluster's address (Ray itself retries for minutes)."""
    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"{address!r} is not a Ray address; write HOST:PORT, e.g. 10.0.0.5:6379")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ConnectionError(f"nothing answers at {hostport} ({exc.strerror or exc})") from None
