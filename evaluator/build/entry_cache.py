"""One build cache's entries on disk: the part the CUDA/CPU-extension cache (`cache.py`) and `load_c`'s cache
(`native_build.py`) share, so that how an entry is found, checked, locked, stored and logged is written once.

Layout (`base` is `<root>/v<format>`; a new format is a new folder, so an older entry is never read as a newer one):

    base/entries/<key[:2]>/<key>/record.json   the outcome: verdict, log, the artifact's name and sha256, who built it
                                               and when, plus the caller's own fields (spec digest, name, toolchain)
    base/entries/<key[:2]>/<key>/<artifact>    the built library, where the build made one
    base/compiles.log                          one JSON line each time a compiler actually ran
    base/locks/<key>.lock                      flock: one build per key at a time, across processes
    base/tmp/                                  staging; an entry appears by an atomic rename, never half-written

An entry is used only where its record names its own key and format, its verdict is one the cache keeps, and its
artifact's bytes match the recorded sha256; anything else is a miss and is rebuilt and replaced. The standard library
only (and the build verdicts, themselves standard library only): `opforge export` vendors this module with `load_c`'s
build path into exported packages (`opforge/export/native_vendor.py`), where opforge is not installed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Collection, Iterator

from evaluator.wire.build_verdict import BuildVerdict  # the standard library only

LOCK_TIMEOUT_LOG = "another build of the same sources did not finish in time"
WITH_LIBRARY = (BuildVerdict.LINKED, BuildVerdict.BUILT)  # the verdicts whose entry holds a library, and only they


@dataclass(frozen=True, slots=True)
class Fresh:
    """What one build attempt left in its work folder: the verdict, the compiler's log and the library's path there
    (None: no library). UNAVAILABLE means no compiler ran: it is neither logged nor stored."""

    verdict: BuildVerdict
    log: str = ""
    artifact: Path | None = None


@dataclass(frozen=True, slots=True)
class Entry:
    """A build's outcome as the cache answers it. `data` holds the library's bytes where there is one, the very bytes
    whose sha256 was checked (a caller serves these, not a second read of the file); `artifact` is the library's path
    in the cache (None where nothing was stored)."""

    verdict: BuildVerdict
    log: str = ""
    artifact: Path | None = None
    data: bytes = b""
    cached: bool = False  # answered from the cache: no compiler ran for this request


@contextlib.contextmanager
def key_lock(path: Path, deadline: float, poll_s: float) -> Iterator[bool]:
    """One build of a key at a time across processes (an flock on the key's lock file); yields False where another
    build still holds it at `deadline` (time.monotonic())."""
    with open(path, "a") as f:
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    yield False
                    return
                time.sleep(poll_s)
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class EntryCache:
    """The entries of one cache format under `root/v<format>`. `stored`: the verdicts worth keeping (a timeout or an
    unavailable builder is not an answer about the sources); `poll_s`: how often a waiting build retries the lock."""

    def __init__(self, root: Path, format: int, stored: Collection[BuildVerdict], poll_s: float):
        self.root, self.format, self.stored, self.poll_s = root, format, frozenset(stored), poll_s
        self.base = root / f"v{format}"
        for sub in ("entries", "locks", "tmp"):
            (self.base / sub).mkdir(parents=True, exist_ok=True)

    def entry(self, key: str) -> Path:
        return self.base / "entries" / key[:2] / key

    def record(self, key: str) -> dict[str, Any] | None:
        """The entry's record.json as written, unchecked; None where there is none or it is not JSON."""
        try:
            record = json.loads((self.entry(key) / "record.json").read_text())
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) else None

    def lookup(self, key: str) -> Entry | None:
        """The stored outcome for `key`; None for a miss, which includes an entry that is damaged, of another format
        or key, or whose library no longer matches its sha256."""
        entry = self.entry(key)
        try:
            record = json.loads((entry / "record.json").read_text())
            if record["key"] != key or record["format"] != self.format or record["verdict"] not in self.stored:
                return None
            if (record["artifact"] is not None) != (record["verdict"] in WITH_LIBRARY):
                return None
            artifact, data = None, b""
            if record["artifact"] is not None:
                artifact = entry / record["artifact"]
                data = artifact.read_bytes()
                if hashlib.sha256(data).hexdigest() != record["artifact_sha256"]:
                    return None
            return Entry(BuildVerdict(record["verdict"]), record.get("log", ""), artifact, data, cached=True)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def compiles(self) -> list[dict[str, Any]]:
        """Every compiler run so far (one dict per run: key, name, verdict, context, pid, started, finished)."""
        try:
            lines = (self.base / "compiles.log").read_text().splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
        return out

    def get_or_build(self, key: str, deadline: float, build: Callable[[Path, float], Fresh], *, name: str,
                     context: str, fields: dict[str, Any], work_prefix: str) -> Entry:
        """The stored outcome, or `build(work folder, seconds left)` run once for all processes asking for `key` (the
        others wait on the key's lock until `deadline`, then read its entry). Its outcome is logged unless no compiler
        ran, and stored where its verdict is kept; `fields` go into the record beside the outcome."""
        if (hit := self.lookup(key)) is not None:
            return hit
        with key_lock(self.base / "locks" / f"{key}.lock", deadline, self.poll_s) as locked:
            if not locked:
                return Entry(BuildVerdict.TIMEOUT, LOCK_TIMEOUT_LOG)
            if (hit := self.lookup(key)) is not None:  # built by whoever held the lock
                return hit
            with tempfile.TemporaryDirectory(prefix=work_prefix) as work:
                started = time.time()
                fresh = build(Path(work), deadline - time.monotonic())
                finished = time.time()
                data = fresh.artifact.read_bytes() if fresh.artifact is not None else b""
                if fresh.verdict != BuildVerdict.UNAVAILABLE:
                    self._note({"key": key, "name": name, "verdict": fresh.verdict, "context": context,
                                "pid": os.getpid(), "started": started, "finished": finished})
                if fresh.verdict not in self.stored:
                    return Entry(fresh.verdict, fresh.log, None, data)
                artifact_name = fresh.artifact.name if fresh.artifact is not None else None
                record = {**fields, "format": self.format, "key": key, "verdict": fresh.verdict, "log": fresh.log,
                          "artifact": artifact_name, "context": context, "pid": os.getpid(), "started": started,
                          "finished": finished, "build_id": uuid.uuid4().hex}
                target = self._store(key, record, data)
        return Entry(fresh.verdict, fresh.log, target / artifact_name if artifact_name else None, data)

    # -- internals --------------------------------------------------------------------------------------------------
    def _note(self, line: dict[str, Any]) -> None:
        with open(self.base / "compiles.log", "a") as f:
            f.write(json.dumps(line) + "\n")

    def _store(self, key: str, record: dict[str, Any], data: bytes) -> Path:
        """Writes the entry in staging and renames it into place (held under the key's lock)."""
        staging = Path(tempfile.mkdtemp(prefix="entry-", dir=self.base / "tmp"))
        if record["artifact"] is not None:
            (staging / record["artifact"]).write_bytes(data)
            record["artifact_sha256"] = hashlib.sha256(data).hexdigest()
        (staging / "record.json").write_text(json.dumps(record, indent=1))
        target = self.entry(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():  # an unreadable, damaged or stale entry (lookup missed it): moved away, then replaced
            trash = self.base / "tmp" / f"trash-{uuid.uuid4().hex}"
            os.rename(target, trash)
            shutil.rmtree(trash, ignore_errors=True)
        os.rename(staging, target)
        return target
