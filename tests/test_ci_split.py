"""`.ci/run` runs the files in `SERIAL_FILES` alone: a name there that matches no file would leave a file that
measures the machine running beside others, silently."""

from __future__ import annotations

from pathlib import Path

from conftest import FILE_SECONDS, SERIAL_FILES

TESTS = Path(__file__).resolve().parent


def test_every_serial_file_exists_and_says_why():
    for name, why in SERIAL_FILES.items():
        assert (TESTS / name).is_file(), f"tests/conftest.py: SERIAL_FILES names {name}, which does not exist"
        assert why.strip(), name


def test_the_ci_script_runs_serial_files_alone_after_the_rest():
    ci = (TESTS.parent / ".ci" / "run").read_text()
    assert '-m "not serial"' in ci and "-m serial" in ci and "--dist loadfile" in ci


def test_the_longest_files_are_named_as_they_exist_and_handed_out_first():
    for name, seconds in FILE_SECONDS.items():
        assert (TESTS / name).is_file(), f"tests/conftest.py: FILE_SECONDS names {name}, which does not exist"
        assert name not in SERIAL_FILES and seconds > 0, name
    ci = (TESTS.parent / ".ci" / "run").read_text()
    assert "--no-loadscope-reorder" in ci  # else xdist orders files by their number of tests, not by FILE_SECONDS
