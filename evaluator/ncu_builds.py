"""The build cache for the process Nsight Compute profiles: its load_inline calls are answered by the driver's
`BuildServer` (so a profile reuses the evaluation's cached builds instead of rebuilding everything), over files in the
job folder, since ncu starts that process and no socket of ours reaches it.

The target writes `builds/<n>.req.json` (a spec) and waits for `builds/<n>.rep.json` (the verdict) and, for a linked
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

Answer = Callable[[Any, float], tuple[dict[str, Any], list[torch.Tensor]]]  # BuildServer.answer
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
                    header, blobs = self.answer(raw, self.timeout_s)
                except (OSError, ValueError) as exc:
                    header, blobs = {"cmd": "built", "verdict": "refused", "log": f"unreadable build request: {exc}"}, []
                if blobs:
                    _write_atomic(self.dir / f"{n}.so", blobs[0].numpy().tobytes())
                _write_atomic(self.dir / f"{n}.rep.json", json.dumps({**header, "blobs": len(blobs)}).encode())
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
        if header.get("status") == "build":
            self._n += 1
            _write_atomic(self.dir / f"{self._n}.req.json", json.dumps(header.get("spec")).encode())

    def recv(self) -> tuple[dict[str, Any], list[torch.Tensor]]:
        rep = self.dir / f"{self._n}.rep.json"
        deadline = time.monotonic() + self.timeout_s
        while not rep.exists():
            if time.monotonic() > deadline:
                return {"cmd": "built", "verdict": "skipped"}, []
            time.sleep(POLL_S)
        header = json.loads(rep.read_text())
        blobs = []
        if header.pop("blobs", 0):
            blobs = [torch.frombuffer(bytearray((self.dir / f"{self._n}.so").read_bytes()), dtype=torch.uint8)]
        return header, blobs
