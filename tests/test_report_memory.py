"""Peak memory in what a user reads of a run (issue 40): `opforge show` lists the Pareto front with both sides' peak
memory and says once why energy is missing; the HTML report plots speed against peak memory with the front ringed.
A store built without the evaluator: a CPU run whose faster kernels take more memory."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from store_fixtures import make_task, ok_result

from evaluator.candidate import Candidate
from evaluator.result import DeviceInfo
from opforge.cli import main
from store import get_store

NATIVE_CPU = DeviceInfo(kind="cpu", name="AMD EPYC (2 cores)", torch_version="2.11.0")
MIB = 2**20
REFERENCE_BYTES = 24 * MIB
# (speedup, peak memory): 1.4x at 8 MiB and 1.1x at 1 MiB are on the front; 1.0x at 4 MiB is beaten by both.
KERNELS = [(1.4, 8 * MIB), (1.1, 1 * MIB), (1.0, 4 * MIB)]


def _run(url: str) -> int:
    with get_store(url) as store:
        task = store.add_task(make_task(name="gelu_bn_pool", body="# gelu_bn_pool\n"))
        run = store.create_run(task.id, {"coder": "tune"}, {"max_candidates": len(KERNELS)})
        for i, (speedup, peak) in enumerate(KERNELS):
            cand = Candidate.from_source(f"# kernel {i}\n", origin="seed" if i == 0 else "tune")
            rec, _ = store.add_candidate(run.id, task.id, cand, generation=min(i, 1))
            store.add_result(rec.id, run.id, dataclasses.replace(
                ok_result(speedup, NATIVE_CPU), peak_memory_bytes=peak, reference_peak_memory_bytes=REFERENCE_BYTES))
        return run.id


def test_show_lists_the_front_with_both_sides_memory_and_says_why_no_energy(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    url = f"sqlite:///{tmp_path / 'opforge.db'}"
    run_id = _run(url)
    assert main(["show", str(run_id), "--db", url]) == 0
    out = capsys.readouterr().out
    front = out.split("pareto front")[1].split("lineage")[0]
    rows = [line for line in front.splitlines() if line.strip().startswith("#")]
    assert len(rows) == 2 and "1.40x" in rows[0] and "1.10x" in rows[1]
    assert "memory 8.0 MiB (reference 24.0 MiB)" in rows[0] and "memory 1.0 MiB (reference 24.0 MiB)" in rows[1]
    assert front.count("energy not measured:") == 1


def test_the_report_plots_speed_against_peak_memory(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    url = f"sqlite:///{tmp_path / 'opforge.db'}"
    run_id = _run(url)
    assert main(["report", str(run_id), "--db", url, "--out", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    html = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    memory = html.split("<h2>Speed vs peak memory</h2>")[1].split("<h2>")[0]
    assert "<svg" in memory and "speed vs peak memory" in memory
    assert "The reference (PyTorch) took 24 MiB a call" in memory
    assert "Energy was not measured" in html and "RAPL" in html
    table = html.split("Pareto front (speedup up")[1].split("</table>")[0]
    assert table.count("<tr>") == 3 and table.count("24.0 MiB") == 2  # header and the two front kernels
