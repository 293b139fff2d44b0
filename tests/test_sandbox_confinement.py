"""The sandbox's own parts, without an evaluation: the build jail (the build stage's compilers without bubblewrap),
the worker's read view, and the setting that refuses to evaluate without bubblewrap.

The escapes themselves, through a whole evaluation under each sandbox, are cheats in tests/cheats run by
tests/test_cheats_beside.py::test_escape_is_closed_under_each_sandbox."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.build import builder
from evaluator.sandbox import read_view
from evaluator.sandbox import launch as sandbox
from evaluator.sandbox.landlock import abi_version

needs_landlock = pytest.mark.skipif(abi_version() < 1, reason="this kernel has no Landlock")
needs_cc = pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler here")


def _jailed(work: Path, *cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*builder.jail_prefix(work), *cmd], cwd=work, env=builder.plain_env(work),
                          capture_output=True, text=True, timeout=120)


@needs_landlock
@needs_cc
def test_the_build_jail_compiles_its_own_sources_and_nothing_else(tmp_path: Path):
    secret = tmp_path / "secret.txt"  # beside the build folder, as another build's cache entry would be
    secret.write_text("opforge-secret\n")
    work = tmp_path / "build"
    work.mkdir()
    (work / "ok.c").write_text("#include <math.h>\n#include <omp.h>\nfloat f(float x) { return sqrtf(x); }\n")
    honest = _jailed(work, "gcc", "-O2", "-march=native", "-fopenmp", "-shared", "-fPIC", "-o", "ok.so", "ok.c",
                     "-lm")
    assert honest.returncode == 0 and (work / "ok.so").is_file(), honest.stderr
    (work / "incbin.c").write_text(f'__asm__(".section .rodata\\n.incbin \\"{secret}\\"\\n.text\\n");\n')
    incbin = _jailed(work, "gcc", "-c", "incbin.c", "-o", "incbin.o")
    assert incbin.returncode != 0 and "secret.txt" in incbin.stderr, incbin.stderr
    (work / "include.c").write_text(f'#include "{secret}"\n')
    include = _jailed(work, "gcc", "-c", "include.c", "-o", "include.o")
    assert include.returncode != 0, include.stderr
    outside = _jailed(work, "cp", "ok.c", str(tmp_path / "written.c"))
    assert outside.returncode != 0 and not (tmp_path / "written.c").exists()


@needs_landlock
def test_the_build_jail_has_no_unix_socket_and_no_ipc(tmp_path: Path):
    probe = ("import ctypes, socket\n"
             "try:\n    socket.socket(socket.AF_UNIX)\n    print('unix')\nexcept OSError:\n    print('no unix')\n"
             "libc = ctypes.CDLL(None)\n"
             "print('shm' if libc.shmget(0x0f0c4e11, 4096, 0o1666) >= 0 else 'no shm')\n"
             "a, b = socket.socketpair(); print('pair')\n")
    out = _jailed(tmp_path, sys.executable, "-I", "-S", "-c", probe)
    assert out.stdout.split("\n")[:3] == ["no unix", "no shm", "pair"], out.stdout + out.stderr


def test_the_worker_reads_the_evaluator_package_but_not_the_project_folder():
    reads = read_view.worker_reads()
    root = read_view.project_root()
    assert str(root / "evaluator") in reads
    assert str(root) not in reads and not any(Path(p) in root.parents for p in reads if p != "/")
    assert "/etc" not in reads and "/etc/ld.so.cache" in reads
    assert str(Path.home()) not in reads


def test_auto_says_once_what_the_process_sandbox_leaves_open(monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture):
    monkeypatch.setattr(sandbox, "bwrap_available", lambda: False)
    monkeypatch.setattr(sandbox, "_warned", False)
    with caplog.at_level(logging.WARNING, logger="opforge.sandbox"):
        assert sandbox.resolve_isolation("auto", "candidate", {}) == "process"
        assert sandbox.resolve_isolation("auto", "candidate", {}) == "process"
    said = [r.getMessage() for r in caplog.records if r.name == "opforge.sandbox"]
    assert len(said) == 1 and "bubblewrap" in said[0] and "process sandbox" in said[0]
    assert sandbox.resolve_isolation("auto", "reference", {}) == "process"


def test_a_required_sandbox_refuses_to_evaluate_without_bubblewrap(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sandbox, "bwrap_available", lambda: False)
    with pytest.raises(sandbox.SandboxError, match="refuses to evaluate"):
        sandbox.resolve_isolation("auto", "candidate", {sandbox.REQUIRE_ENV: "1"})
    monkeypatch.setenv(sandbox.REQUIRE_ENV, "1")
    with pytest.raises(sandbox.SandboxError):
        sandbox.Zygote("cpu", "candidate", "auto")
    assert sandbox.resolve_isolation("process", "candidate", {sandbox.REQUIRE_ENV: "1"}) == "process"  # asked for


def test_opforge_worker_requires_bubblewrap_by_default(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str], tmp_path: Path):
    import opforge.cli.commands.worker as worker_cmd
    from opforge.cli import main
    monkeypatch.setattr(worker_cmd, "bwrap_available", lambda: False)
    rc = main(["worker", "--db", f"sqlite:///{tmp_path / 'store.db'}", "--runner", "local", "--max-jobs", "1"])
    err = capsys.readouterr().err
    assert rc != 0 and "--no-require-sandbox" in err and err.count("\n") == 1, err
    assert not (tmp_path / "store.db").exists()  # refused before the store was opened
