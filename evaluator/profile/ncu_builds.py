"""The build cache for the process a profiler (Nsight Compute, or `perf stat`: perf_stat.py) runs: its load_inline and
load_c calls are answered by the driver's `BuildServer` (so a profile reuses the evaluation's cached builds instead of
rebuilding everything), over files in the job folder, since the profiler starts that process and no socket of ours
reaches it.

The target writes `builds/<n>.req.json` (the spec and its kind: cuda or native) and waits for `builds/<n>.rep.json` (the verdict) and, for a linked
build, `builds/<n>.so`; each file appears by an atomic rename. The driver validates every spec as it does a worker's.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from evaluator.wire.build_verdict import BuildVerdict
from evaluator.wire.commands import Built
from evaluator.wire.replies import BuildRequest, parse

Answer = Callable[[Any, float, Any], tuple[Built, list[torch.Tensor]]]  # BuildServer.answer (spec, timeout, kind)
POLL_S = 0.05


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class FileBuildServer:
    """The driver's side: a thread answering requests until stopped."""

    def __init__(self, job: Path, answer: Answer, timeout_s: float):
        self.dir = job / "builds"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.answer, self.timeout_s = answer, timeout_s
        self.answered = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> FileBuildServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _serve(self) -> None:
        done: set[str] = set()
        while not self._stop.is_set():
            for req in sorted(self.dir.glob("*.req.json")):
                n = req.name.removesuffix(".req.json")
                if n in done or not n.isdigit():
                    continue
                done.add(n)
                try:
                    raw = json.loads(req.read_text()[:1_000_000])
                    if not isinstance(raw, dict):
                        raise ValueError("not a JSON object")
                    request = parse({**raw, "status": BuildRequest.STATUS})  # MalformedReply: a ValueError
                    assert isinstance(request, BuildRequest)
                    built, blobs = self.answer(request.spec, self.timeout_s, request.kind)
                except (OSError, ValueError) as exc:
                    built, blobs = Built(BuildVerdict.REFUSED, f"unreadable build request: {exc}"), []
                if blobs:
                    _write_atomic(self.dir / f"{n}.so", blobs[0].numpy().tobytes())
                _write_atomic(self.dir / f"{n}.rep.json", json.dumps({**built.to_wire(), "blobs": len(blobs)}).encode())
                self.answered += 1
            self._stop.wait(POLL_S)


class FileChannel:
    """The target's side, shaped as the worker's channel: `send` keeps the worker's last reply or files a build
    request, `recv` waits for that request's answer."""

    def __init__(self, job: Path, timeout_s: float):
        self.dir, self.timeout_s = job / "builds", timeout_s
        self.last: dict[str, Any] = {}
        self._n = 0

    def send(self, header: dict[str, Any], tensors: Any = None) -> None:
        self.last = header
        if header.get("status") == BuildRequest.STATUS:
            self._n += 1
            request = {"spec": header.get("spec"), "kind": header.get("kind")}  # kind: cuda, native (load_c), cpu_extension
            _write_atomic(self.dir / f"{self._n}.req.json", json.dumps(request).encode())

    def recv(self) -> tuple[dict[str, Any], list[torch.Tensor]]:
        rep = self.dir / f"{self._n}.rep.json"
        deadline = time.monotonic() + self.timeout_s
        while not rep.exists():
            if time.monotonic() > deadline:
                return Built(BuildVerdict.SKIPPED).to_wire(), []
            time.sleep(POLL_S)
        header = json.loads(rep.read_text())
        blobs = []
        if header.pop("blobs", 0):
            blobs = [torch.frombuffer(bytearray((self.dir / f"{self._n}.so").read_bytes()), dtype=torch.uint8)]
        return header, blobs
