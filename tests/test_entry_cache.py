"""The build caches' shared entries (`evaluator/build/entry_cache.py`): concurrent builds of one key compile once,
only an entry of the cache's own format, key and bytes is an answer (anything else is rebuilt and replaced), and a
build still holding the key's lock past the deadline is a timeout. No compiler needed, except for `load_c`'s format
change at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from evaluator.build.entry_cache import LOCK_TIMEOUT_LOG, EntryCache, Fresh, key_lock
from evaluator.build.native_build import NativeCache, compiler, entry_key
from evaluator.build.native_spec import NativeSpec
from evaluator.wire.build_verdict import BuildVerdict

STORED = (BuildVerdict.BUILT, BuildVerdict.COMPILE_ERROR)
KEY = "ab" + "0" * 62


def _cache(root: Path) -> EntryCache:
    return EntryCache(root, 7, STORED, poll_s=0.01)


def _library(text: bytes):
    def build(work: Path, left_s: float) -> Fresh:
        (work / "libx.so").write_bytes(text)
        return Fresh(BuildVerdict.BUILT, "", work / "libx.so")
    return build


def _get(cache: EntryCache, build, key: str = KEY, timeout_s: float = 30.0):
    return cache.get_or_build(key, time.monotonic() + timeout_s, build, name="x", context="test",
                              fields={"name": "x"}, work_prefix="entry-test-")


def test_a_build_is_stored_once_and_then_answered_from_the_entry(tmp_path):
    cache = _cache(tmp_path)
    fresh = _get(cache, _library(b"first"))
    assert (fresh.verdict, fresh.data, fresh.cached) == (BuildVerdict.BUILT, b"first", False)
    assert fresh.artifact == cache.entry(KEY) / "libx.so" and fresh.artifact.read_bytes() == b"first"
    hit = _get(cache, _library(b"never built"))
    assert (hit.verdict, hit.data, hit.cached) == (BuildVerdict.BUILT, b"first", True)
    assert [c["verdict"] for c in cache.compiles()] == ["built"]
    record = cache.record(KEY)
    assert record is not None and record["format"] == 7 and record["name"] == "x" and record["context"] == "test"
    assert cache.entry(KEY) == tmp_path / "v7" / "entries" / "ab" / KEY


def test_an_unavailable_builder_is_neither_logged_nor_stored_and_a_timeout_is_logged_only(tmp_path):
    cache = _cache(tmp_path)
    assert _get(cache, lambda work, left: Fresh(BuildVerdict.UNAVAILABLE, "no sandbox")).log == "no sandbox"
    assert cache.compiles() == [] and cache.lookup(KEY) is None
    assert _get(cache, lambda work, left: Fresh(BuildVerdict.TIMEOUT, "slow")).verdict == BuildVerdict.TIMEOUT
    assert [c["verdict"] for c in cache.compiles()] == ["timeout"] and cache.lookup(KEY) is None


@pytest.mark.parametrize("damage", ["format", "key", "bytes", "verdict", "no library", "not json"])
def test_an_entry_that_is_not_this_caches_answer_is_rebuilt_and_replaced(tmp_path, damage):
    cache = _cache(tmp_path)
    _get(cache, _library(b"old"))
    entry = cache.entry(KEY)
    record = json.loads((entry / "record.json").read_text())
    if damage == "format":  # an entry of another format, where this one is looked for
        record["format"] = 6
    elif damage == "key":
        record["key"] = "cd" + "0" * 62
    elif damage == "bytes":
        (entry / "libx.so").write_bytes(b"tampered")
    elif damage == "verdict":
        record["verdict"] = "timeout"
    elif damage == "no library":  # a verdict that holds a library, without one
        record["artifact"] = None
    (entry / "record.json").write_text("{" if damage == "not json" else json.dumps(record))
    assert cache.lookup(KEY) is None
    rebuilt = _get(cache, _library(b"new"))
    assert (rebuilt.data, rebuilt.cached) == (b"new", False) and len(cache.compiles()) == 2
    assert _get(cache, _library(b"never built")).data == b"new"
    assert not any(cache.base.joinpath("tmp").iterdir())  # the replaced entry went away with its staging


def test_a_build_holding_the_key_past_the_deadline_is_a_timeout(tmp_path):
    cache = _cache(tmp_path)
    with key_lock(cache.base / "locks" / f"{KEY}.lock", time.monotonic() + 5, 0.01) as locked:
        assert locked
        waited = _get(cache, _library(b"never built"), timeout_s=0.2)
    assert (waited.verdict, waited.log) == (BuildVerdict.TIMEOUT, LOCK_TIMEOUT_LOG)
    assert cache.compiles() == []


_RACER = textwrap.dedent('''
    import sys, time
    from pathlib import Path
    from evaluator.build.entry_cache import EntryCache, Fresh
    from evaluator.wire.build_verdict import BuildVerdict

    def build(work, left_s):
        time.sleep(0.5)  # long enough for every racer to reach the lock
        (work / "libx.so").write_bytes(b"built once")
        return Fresh(BuildVerdict.BUILT, "", work / "libx.so")

    start = float(sys.argv[2])
    time.sleep(max(0.0, start - time.time()))
    cache = EntryCache(Path(sys.argv[1]), 7, (BuildVerdict.BUILT,), poll_s=0.01)
    got = cache.get_or_build("ab" + "0" * 62, time.monotonic() + 60, build, name="x", context="race", fields={},
                             work_prefix="entry-race-")
    print(got.verdict, got.cached, got.data.decode())
''')


def test_processes_building_one_key_at_once_compile_it_once(tmp_path):
    start = time.time() + 2.0  # every racer imported and waiting by then
    racers = [subprocess.Popen([sys.executable, "-c", _RACER, str(tmp_path), str(start)], stdout=subprocess.PIPE,
                               text=True, env=os.environ.copy()) for _ in range(3)]
    answers = sorted(p.communicate(timeout=120)[0].strip() for p in racers)
    assert all(p.returncode == 0 for p in racers)
    assert answers == ["built False built once", "built True built once", "built True built once"]
    assert [c["context"] for c in _cache(tmp_path).compiles()] == ["race"]


@pytest.mark.skipif(compiler("c") is None, reason="needs a C compiler")
def test_load_c_entries_of_the_first_format_are_not_read_but_built_again(tmp_path):
    """Format 1 kept `status`/`library` in `v1/<key[:2]>/<key>/`; format 2 does not read that folder at all."""
    spec = NativeSpec.from_call("one", "void one(float* x) { x[0] = 1; }", ["one"], [], "c")
    key = entry_key(spec)
    old = tmp_path / "v1" / key[:2] / key
    old.mkdir(parents=True)
    (old / "libone.so").write_bytes(b"a format-1 library")
    (old / "record.json").write_text(json.dumps({"format": 1, "key": key, "status": "built", "library": "libone.so"}))
    cache = NativeCache(tmp_path)
    assert cache.lookup(key) is None and cache.library_path(key) is None
    built = cache.get_or_build(spec)
    assert built.status == BuildVerdict.BUILT and not built.cached and built.library.startswith(b"\x7fELF")
    assert cache.library_path(key) == tmp_path / "v2" / "entries" / key[:2] / key / "libone.so"
    assert [c["verdict"] for c in cache.compiles()] == ["built"]
