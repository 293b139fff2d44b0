"""Bad command-line input is one `opforge:` sentence naming the file and the problem on stderr, exit status 2 (and
Ctrl-C says what was kept). Each test calls main() in this process: no evaluation runs."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

import opforge.cli.commands.optimize as optimize_cmd
from opforge.cli import main
from opforge.cli.commands.serve import DEFAULT_PORT
from opforge.run.plan import _binds_model_new, resolve_task

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "benchmarks" / "tiny"
TASK, SEED = TINY / "relu.py", TINY / "relu.seed.py"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _one_sentence(err: str, *words: str) -> None:
    assert err.startswith("opforge: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for w in words:
        assert w in err, (w, err)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'opforge.db'}"


# 1. --device cuda without CUDA

@pytest.mark.parametrize("argv", [["eval", str(TASK), str(SEED), "--device", "cuda"],
                                  ["task", "check", str(TASK), "--device", "cuda"]])
def test_device_cuda_without_cuda_is_one_sentence(capsys, monkeypatch, argv) -> None:  # noqa: ANN001
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rc, out, err = _run(capsys, *argv)
    assert rc == 2 and out == ""
    _one_sentence(err, "--device cuda", "no CUDA device")


# 2. dataset import of files that are no dataset

@pytest.mark.parametrize("name, content, words", [
    ("bin.jsonl", b"\xff\xfe\x00\x81binary", "cannot be read as UTF-8"),
    ("empty.jsonl", b"", "holds no records"),
    ("blank.jsonl", b"\n  \n", "holds no records"),
    ("list.jsonl", b"[1, 2]\n", "line 1 is not a JSON object"),
])
def test_dataset_import_of_a_bad_jsonl_file(tmp_path: Path, capsys, url: str, name: str, content: bytes,  # noqa: ANN001
                                           words: str) -> None:
    f = tmp_path / name
    f.write_bytes(content)
    rc, out, err = _run(capsys, "dataset", "import", str(f), "--db", url)
    assert rc == 2 and "imported" not in out
    _one_sentence(err, str(f), words)


def test_dataset_import_of_a_file_that_is_not_parquet(tmp_path: Path, capsys, url: str) -> None:  # noqa: ANN001
    pytest.importorskip("pyarrow")
    f = tmp_path / "kernels.parquet"
    f.write_text("not parquet at all\n")
    rc, _, err = _run(capsys, "dataset", "import", str(f), "--db", url)
    assert rc == 2
    _one_sentence(err, str(f), "cannot be read as a Parquet file")


# 3. --timing-s must be positive

@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_eval_refuses_non_positive_timing(capsys, value: str) -> None:  # noqa: ANN001
    rc, out, err = _run(capsys, "eval", str(TASK), str(SEED), "--device", "cpu", "--timing-s", value)
    assert rc == 2 and out == ""
    _one_sentence(err, "--timing-s must be a positive number of seconds")


# 4. a seed kernel that cannot be a kernel

@pytest.mark.parametrize("command", ["optimize", "submit"])
@pytest.mark.parametrize("body, words", [("import torch\nclass Model(torch.nn.Module):\n    pass\n", "ModelNew"),
                                         ("class ModelNew(:\n", "syntax error on line 1")])
def test_seed_kernel_without_model_new_fails_at_once(tmp_path: Path, capsys, url: str, command: str,  # noqa: ANN001
                                                     body: str, words: str) -> None:
    seed = tmp_path / "seed.py"
    seed.write_text(body)
    extra = ["--runner", "local"] if command == "optimize" else []
    rc, out, err = _run(capsys, command, "relu", "--seed-kernel", str(seed), "--coder", "tune", "--budget", "2",
                        *extra, "--db", url)
    assert rc == 2 and out == ""
    _one_sentence(err, str(seed), words)


def test_model_new_may_be_bound_other_ways() -> None:
    import ast
    for src in ("ModelNew = make()\n", "from k import Fast as ModelNew\n",
                "try:\n    import triton\nexcept ImportError:\n    pass\nelse:\n    class ModelNew: pass\n"):
        assert _binds_model_new(ast.parse(src).body), src
    assert not _binds_model_new(ast.parse("def f():\n    class ModelNew: pass\n").body)


# 5. a missing task path is a missing file, not an unknown built-in name

@pytest.mark.parametrize("name", ["missing.py", "sub/missing", "./missing"])
def test_missing_task_path_is_no_such_task_file(tmp_path: Path, capsys, monkeypatch, url: str,  # noqa: ANN001
                                               name: str) -> None:
    monkeypatch.chdir(tmp_path)
    rc, _, err = _run(capsys, "optimize", name, "--db", url)
    assert rc == 2
    _one_sentence(err, f"{name}: no such task file")
    assert "choose one of" not in err


def test_built_in_names_still_resolve(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.chdir(tmp_path)
    assert resolve_task("relu.py").name == "relu" and resolve_task("tiny/relu").name == "relu"
    from opforge.errors import UsageError
    with pytest.raises(UsageError, match="no built-in task called 'tiny/reluu'"):
        resolve_task("tiny/reluu")


# 6. serve on a taken port or an unknown host

def test_serve_on_a_taken_port_is_one_sentence_before_the_banner(capsys, url: str) -> None:  # noqa: ANN001
    pytest.importorskip("uvicorn")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        rc, _, err = _run(capsys, "serve", "--port", str(port), "--db", url)
    assert rc == 2
    _one_sentence(err, f"Port {port}", "already in use")


def test_serve_on_an_unknown_host_is_one_sentence(capsys, url: str) -> None:  # noqa: ANN001
    pytest.importorskip("uvicorn")
    rc, _, err = _run(capsys, "serve", "--host", "no-such-host.invalid", "--db", url)
    assert rc == 2
    _one_sentence(err, "--host no-such-host.invalid")


# 7. Ctrl-C names the run and how to continue it; --resume says where it starts

def test_interrupted_optimize_names_the_run_and_resume_says_where_it_starts(capsys, monkeypatch,  # noqa: ANN001
                                                                              url: str) -> None:
    def interrupted(*_args, **_kwargs):  # noqa: ANN002, ANN003, ANN202
        raise KeyboardInterrupt

    monkeypatch.setattr(optimize_cmd, "_search", interrupted)
    rc, _, err = _run(capsys, "optimize", "relu", "--coder", "tune", "--runner", "local", "--budget", "2",
                      "--no-archive", "--db", url)
    assert rc == 130
    assert err == f"opforge: interrupted; run 1 is kept: continue it with opforge optimize --resume 1 --db {url}\n"
    rc, _, err = _run(capsys, "optimize", "--resume", "1", "--runner", "local", "--db", url)
    assert rc == 130
    assert err.splitlines() == ["opforge: resuming run 1 on relu: 0 of 2 candidates evaluated",
                                f"opforge: interrupted; run 1 is kept: continue it with opforge optimize --resume 1 "
                                f"--db {url}"]


def test_interrupt_before_a_run_exists_says_only_interrupted(capsys, monkeypatch, url: str) -> None:  # noqa: ANN001
    def interrupted(*_args, **_kwargs):  # noqa: ANN002, ANN003, ANN202
        raise KeyboardInterrupt

    monkeypatch.setattr(optimize_cmd, "make_runner", interrupted)
    rc, _, err = _run(capsys, "optimize", "relu", "--coder", "tune", "--db", url)
    assert rc == 130 and err == "opforge: interrupted\n"


# 8. bench without --suite or --resume

def test_bench_with_neither_suite_nor_resume(capsys, url: str) -> None:  # noqa: ANN001
    rc, _, err = _run(capsys, "bench", "--db", url)
    assert rc == 2
    _one_sentence(err, "Give --suite NAME|PATH to start a bench, or --resume BENCH_ID to continue one.")
    assert "not both" not in err


# 9. documented defaults and required flags

def test_readme_gives_serve_its_real_default_port() -> None:
    lines = [line for line in (REPO / "README.md").read_text().splitlines() if "opforge serve" in line]
    ports = {int(p) for line in lines for p in re.findall(r"--port (\d+)", line)}
    assert ports == {DEFAULT_PORT}


def test_report_help_shows_out_as_required(capsys) -> None:  # noqa: ANN001
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    usage = capsys.readouterr().out.split("\n\n")[0]
    assert "--out DIR" in usage and "[--out" not in usage


# 10. a directory where a file is expected

@pytest.mark.parametrize("which", ["task", "candidate"])
def test_eval_of_a_directory_says_so(tmp_path: Path, capsys, which: str) -> None:  # noqa: ANN001
    d = tmp_path / "adir"
    d.mkdir()
    argv = [str(d), str(SEED)] if which == "task" else [str(TASK), str(d)]
    rc, _, err = _run(capsys, "eval", *argv, "--device", "cpu")
    assert rc == 2
    _one_sentence(err, f"{d} is a directory, not a file")


def test_dataset_import_of_a_directory_says_so(tmp_path: Path, capsys, url: str) -> None:  # noqa: ANN001
    rc, _, err = _run(capsys, "dataset", "import", str(tmp_path), "--db", url)
    assert rc == 2
    _one_sentence(err, f"{tmp_path} is a directory, not a file")


# 12. task check --json of one unusable task still prints its record

def test_task_check_json_of_one_unusable_task_prints_the_record(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n")
    rc, out, err = _run(capsys, "task", "check", str(bad), "--json")
    assert rc == 2
    [record] = [json.loads(line) for line in out.splitlines()]
    assert record["task"] == str(bad) and record["ok"] is False and "syntax error" in record["unusable"]
    _one_sentence(err, str(bad))


def test_show_refuses_source_with_json(capsys, tmp_path: Path) -> None:  # noqa: ANN001
    rc, out, err = _run(capsys, "show", "1", "--json", "--source", "--db", f"sqlite:///{tmp_path / 's.db'}")
    assert rc == 2 and out == ""
    _one_sentence(err, "--source", "--json")


def test_web_form_and_cli_judge_a_seed_kernel_by_one_rule(tmp_path: Path, capsys, url: str) -> None:  # noqa: ANN001
    from opforge.web.submission import SubmissionError, Upload, check_seed

    bound = "import torch.nn as nn\nclass _Impl(nn.Module):\n    pass\nModelNew = _Impl\n"
    assert check_seed(Upload("bound.py", bound.encode())) == bound  # accepted by both, as --seed-kernel accepts it
    with pytest.raises(SubmissionError) as err:
        check_seed(Upload("plain.py", b"x = 1\n"))
    seed = tmp_path / "plain.py"
    seed.write_text("x = 1\n")
    rc, _, cli_err = _run(capsys, "optimize", str(TASK), "--seed-kernel", str(seed), "--db", url)
    assert rc == 2 and str(err.value.args[-1]).split(": ", 1)[1] in cli_err


def test_a_lost_command_module_fails_loudly(monkeypatch) -> None:  # noqa: ANN001
    """A command whose module is missing must break the CLI (and its tests), not vanish from `opforge --help`."""
    import opforge.cli.program as cli_main

    monkeypatch.setattr(cli_main, "COMMAND_MODULES", (*cli_main.COMMAND_MODULES, "no_such_command"))
    with pytest.raises(ModuleNotFoundError, match="no_such_command"):
        cli_main.build_parser()


def test_every_command_module_registers_its_command() -> None:
    import opforge.cli.program as cli_main

    parser = cli_main.build_parser()
    [sub] = [a for a in parser._actions if a.dest == "command"]
    assert set(cli_main.COMMAND_MODULES) <= set(sub.choices)  # `runs` registers `show` too
