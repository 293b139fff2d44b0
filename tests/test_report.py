"""`opforge report`: the HTML page, its CSV and JSON, and the SVG helpers, on stores built without the evaluator."""

from __future__ import annotations

import csv
import dataclasses
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from store_fixtures import CPU, H100, failed_result, make_task, ok_result

from evaluator.candidate import Candidate
from evaluator.result import Status
from opforge.reports import svg_plots
from opforge.cli import main
from opforge.reports.leaderboard import leaderboard
from store import Store, get_store

EVIL = "<script>alert('x')</script>"


def _url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'opforge.db'}"


def _run(store: Store, name: str, speedups: list[float | None], device=H100, energy: bool = True,
         bench_id: int | None = None, note: str = "", seed_speedup: float | None = 1.0) -> int:
    """A run of task `name`: a seed, one tuned child of it per speedup (None: a compile error), then one pending."""
    task = store.add_task(make_task(name=name, body=f"# {name}\n"))
    run = store.create_run(task.id, {"coder": "tune"}, {"max_candidates": len(speedups) + 2}, bench_id=bench_id)
    seed = Candidate.from_source(f"# seed of {name} in run {run.id}\n", origin="seed")
    children = [Candidate.from_source(f"# {name} child {i} in run {run.id}\n", origin="tune", parents=(seed.digest,),
                                      note=f"BLOCK_SIZE {i} {note}") for i in range(len(speedups))]
    for i, (cand, s) in enumerate(zip([seed, *children], [seed_speedup, *speedups])):
        rec, _ = store.add_candidate(run.id, task.id, cand, generation=min(i, 1), island=i % 2)
        store.add_result(rec.id, run.id, failed_result(Status.COMPILE_ERROR, device) if s is None
                         else _result(s, device, energy, i))
    pending = Candidate.from_source(f"# {name} pending in run {run.id}\n", origin="tune")
    store.add_candidate(run.id, task.id, pending, generation=2)
    return run.id


def _result(speedup: float, device, energy: bool, i: int):  # noqa: ANN001, ANN202
    r = ok_result(speedup, device)
    if not energy:
        return r
    return dataclasses.replace(r, energy_j=1e-3 / speedup * (1 + 0.1 * i), reference_energy_j=1e-3,
                               peak_memory_bytes=1 << 20, reference_peak_memory_bytes=2 << 20)


def _report(capsys, *argv: str) -> tuple[int, str, str]:  # noqa: ANN001
    rc = main(["report", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _self_contained(html: str) -> None:
    assert not re.search(r"https?://", html)
    assert not re.search(r"<script|<link|<img|<iframe|@import|url\(|\bsrc=", html, re.I)


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_run_report_writes_page_csv_and_json(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    url = _url(tmp_path)
    with get_store(url) as store:
        run_id = _run(store, f"relu{EVIL}", [2.5, None, 0.5], note=EVIL)
        history = store.history(run_id)
    out = tmp_path / "new" / "report"

    rc, stdout, _ = _report(capsys, str(run_id), "--db", url, "--out", str(out))

    assert rc == 0 and stdout.strip().splitlines()[-1] == str(out / "index.html")
    html = (out / "index.html").read_text(encoding="utf-8")
    assert html.count("<svg") == 4  # progress, distribution, speed vs energy, speed vs memory
    assert "relu&lt;script&gt;" in html and "BLOCK_SIZE 0 &lt;script&gt;" in html
    _self_contained(html)
    assert "NVIDIA H100 80GB HBM3" in html and f"opforge report {run_id} --db" in html

    rows = _csv(out / "candidates.csv")
    assert [int(r["candidate_id"]) for r in rows] == [sc.candidate.id for sc in history]  # pending one included
    assert [float(r["speedup"]) if r["speedup"] else None for r in rows] == [sc.speedup for sc in history]
    assert [r["status"] for r in rows] == ["ok", "ok", "compile_error", "ok", ""]

    data = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert data["kind"] == "run" and data["run"]["run_id"] == run_id and data["run"]["task"] == f"relu{EVIL}"
    assert [c["speedup"] for c in data["candidates"]] == [sc.speedup for sc in history]
    assert data["run"]["best"][0]["speedup"] == pytest.approx(2.5)
    assert data["run"]["by_status"] == {"ok": 3, "compile_error": 1}
    assert [m["candidate_id"] for m in data["run"]["lineage"]] == [history[0].candidate.id, history[1].candidate.id]


def test_run_without_energy_says_so_instead_of_an_empty_chart(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    url = _url(tmp_path)
    with get_store(url) as store:
        run_id = _run(store, "softmax", [0.02, 0.001], device=CPU, energy=False)
    rc, _, _ = _report(capsys, str(run_id), "--db", url, "--out", str(tmp_path / "out"))
    html = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert rc == 0 and html.count("<svg") == 2
    assert "Energy was not measured on cpu (Triton interpreter)" in html


def test_report_refusals_are_one_sentence(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    url = _url(tmp_path)
    with get_store(url) as store:
        run_id = _run(store, "relu", [1.5])
    (tmp_path / "afile").write_text("x")
    cases = [
        (["99", "--db", url, "--out", str(tmp_path / "a")], "no run with id 99"),
        ([str(run_id), "--db", url, "--out", str(tmp_path / "afile")], "is a file"),
        (["--suite", "nothing-here", "--db", url, "--out", str(tmp_path / "b")], "no bench of suite nothing-here"),
        (["--db", url, "--out", str(tmp_path / "c")], "RUN_ID"),
        ([str(run_id), "--db", url], "--out"),
    ]
    for argv, expected in cases:
        rc, stdout, stderr = _report(capsys, *argv)
        assert rc == 2 and stdout == "", argv
        assert expected in stderr and stderr.count("\n") == 1 and stderr.rstrip().endswith("."), stderr
    assert not (tmp_path / "a").exists()


def _suite_store(url: str, suite: str) -> None:
    with get_store(url) as store:
        tune = store.create_bench(suite, "tune", {"coder": "tune"}).id
        llm = store.create_bench(suite, f"llm {EVIL}", {"coder": "llm"}).id
        for name, s in (("relu", 1.8), ("softmax", 0.4), ("gelu", None)):
            _run(store, name, [s], bench_id=tune, seed_speedup=None if s is None else 1.0)
        for name, s in (("relu", 3.0), ("softmax", 1.2), ("gelu", 0.9)):
            _run(store, name, [s], bench_id=llm, energy=False)


def test_suite_report_with_a_folder_suite(tmp_path: Path, capsys, monkeypatch) -> None:  # noqa: ANN001
    (tmp_path / "mysuite").mkdir()
    suite = str((tmp_path / "mysuite").resolve())
    url = _url(tmp_path)
    _suite_store(url, suite)
    monkeypatch.chdir(tmp_path)

    rc, stdout, _ = _report(capsys, "--suite", "mysuite", "--db", url, "--out", "rep")

    assert rc == 0 and stdout.strip() == str(tmp_path / "rep" / "index.html")
    html = (tmp_path / "rep" / "index.html").read_text(encoding="utf-8")
    assert html.count("<svg") == 3  # per task, distribution, speed vs energy
    assert all(name in html for name in ("relu", "softmax", "gelu")) and "llm &lt;script&gt;" in html
    _self_contained(html)
    with get_store(url) as store:
        rows = leaderboard(store, suite)
    tasks = _csv(tmp_path / "rep" / "tasks.csv")
    assert len(tasks) == 6
    expected = {(r.agent, t.task): t.speedup for r in rows for t in r.tasks}
    got = {(t["agent"], t["task"]): float(t["speedup"]) if t["speedup"] else None for t in tasks}
    assert got == expected and got[("tune", "gelu")] is None and got[("tune", "relu")] == pytest.approx(1.8)
    assert got[(f"llm {EVIL}", "relu")] == pytest.approx(3.0) and [r.correct for r in rows] == [3, 2]
    board = _csv(tmp_path / "rep" / "leaderboard.csv")
    assert [b["agent"] for b in board] == [r.agent for r in rows]
    assert [float(b["fast_1"]) for b in board] == [r.fast_p["1"] for r in rows]
    data = json.loads((tmp_path / "rep" / "report.json").read_text(encoding="utf-8"))
    assert data["kind"] == "suite" and data["suite"] == suite
    assert data["rows"] == json.loads(json.dumps([r.to_json() for r in rows]))


def test_suite_without_energy_says_so(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    url = _url(tmp_path)
    with get_store(url) as store:
        bench = store.create_bench("tiny", "tune", {"coder": "tune"}).id
        _run(store, "relu", [0.01], device=CPU, energy=False, bench_id=bench)
    rc, _, _ = _report(capsys, "--suite", "tiny", "--db", url, "--out", str(tmp_path / "o"))
    html = (tmp_path / "o" / "index.html").read_text(encoding="utf-8")
    assert rc == 0 and html.count("<svg") == 2 and "Energy was not measured on cpu" in html


# --- the SVG helpers -------------------------------------------------------------------------------------------------

def _parse(svg: str) -> ET.Element:
    assert svg.startswith("<svg ") and svg.endswith("</svg>") and svg.count("<svg") == 1
    return ET.fromstring(svg)


def _texts(root: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in root.iter("text")]


def test_charts_with_no_data_say_so() -> None:
    charts = [svg_plots.progress_chart([]), svg_plots.histogram({"a": []}),
              svg_plots.scatter({"a": []}, title="t", x_label="x", y_label="y"),
              svg_plots.grouped_bars([], {}, title="t")]
    for svg in charts:
        root = _parse(svg)
        assert not list(root.iter("circle")) and any(t.startswith("no") for t in _texts(root))


def test_charts_with_one_point() -> None:
    scatter = _parse(svg_plots.scatter({"s": [svg_plots.Point(0.5, 2.0, "only <one>")]}, title="t", x_label="x",
                                       y_label="y"))
    [dot] = scatter.iter("circle")
    assert dot.find("title").text == "only <one>"  # escaped in the markup, read back as text
    hist = _parse(svg_plots.histogram({"s": [2.0]}))
    bars = [r for r in hist.iter("rect") if r.get("class") == "bar"]
    assert len(bars) == 1 and "1 in" in bars[0].find("title").text
    progress = _parse(svg_plots.progress_chart([svg_plots.Point(1, None, "#1", "compile_error")]))
    assert len(list(progress.iter("circle"))) == 1 and "compile_error" in _texts(progress)


def test_log_axis_spanning_a_thousandth_to_ten() -> None:
    assert svg_plots.log_ticks(0.001, 10.0) == [0.001, 0.01, 0.1, 1.0, 10.0]
    scale = svg_plots.Scale(0.001, 10.0, 300.0, 0.0, log=True)
    assert scale(0.001) == pytest.approx(300.0) and scale(10.0) == pytest.approx(0.0)
    assert scale(1.0) == pytest.approx(75.0)
    values = [0.001, 0.003, 0.05, 0.9, 1.0, 10.0]
    edges = svg_plots.log_bins(values)
    assert edges[0] <= 0.001 and edges[-1] > 10.0 and 5 <= len(edges) - 1 <= 30
    hist = _parse(svg_plots.histogram({"s": values + [0.0, -1.0]}))  # non-positive values are left out of a log axis
    counts = [int(b.find("title").text.split(": ")[1].split(" ")[0]) for b in hist.iter("rect")
              if b.get("class") == "bar"]
    assert sum(counts) == len(values)
    bars = _parse(svg_plots.grouped_bars(["a", "b<c>"], {"x": [0.001, 10.0], "y": [None, 2.0]}, title="t"))
    labels = _texts(bars)
    assert {"0.001x", "0.01x", "0.1x", "1x", "10x"} <= set(labels) and "b<c>" in labels
    assert sum(1 for r in bars.iter("rect") if r.get("class") == "bar") == 3
    [miss] = [t for t in bars.iter("text") if t.get("class") == "miss"]
    assert miss.find("title").text == "a · y: no value"
