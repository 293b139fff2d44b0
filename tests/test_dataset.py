"""`opforge dataset export|import`: records from a real LLM run, both formats, loaded by pandas and Hugging Face
`datasets`, filters, decontamination, and a round trip into another store whose archive then offers the kernels."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fake_llm_server import FakeLLMServer, Rule, reply

from opforge.run import archive
from opforge.export.dataset import SCHEMA_VERSION, DatasetError, import_records, read_records
from store import get_store

ROOT = Path(__file__).resolve().parent.parent
OPFORGE = [sys.executable, "-m", "opforge"]
SEED = (ROOT / "benchmarks" / "tiny" / "relu.seed.py").read_text()
LAUNCH = "relu_kernel[grid](x, out, n_elements, BLOCK_SIZE=1024, num_warps=4)"
GOOD = SEED.replace(LAUNCH, LAUNCH.replace("1024", "256"))
WRONG = SEED.replace("tl.maximum(x, 0.0)", "tl.maximum(x, 1.0)")

pytestmark = pytest.mark.slow


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*OPFORGE, *args], capture_output=True, text=True, timeout=600, cwd=cwd)


@pytest.fixture(scope="module")
def llm_store(tmp_path_factory) -> str:
    """A store holding one small LLM run on the built-in relu: a wrong first kernel, then a correct one (no
    confirmation re-measurements: the dataset holds none)."""
    tmp = tmp_path_factory.mktemp("dataset")
    db = f"sqlite:///{tmp / 'source.db'}"
    rules = [Rule("You are writing a fast", [reply(f"<think>start simple</think>\n```python\n{WRONG}```")]),
             Rule("failed evaluation", [reply(json.dumps({"problem": "clamp", "fix": "0.0"}))]),
             Rule("You are improving", [reply(f"```python\n{GOOD}```")]),
             Rule("You are combining|performance engineer|screening", [reply("nothing")])]
    with FakeLLMServer(rules=rules) as server:
        done = cli("optimize", "relu", "--coder", "llm", "--model", "m", "--llm-base-url", server.base_url,
                   "--from-scratch", "--tune-per-request", "0", "--no-review", "--budget", "2", "--runner", "local",
                   "--confirm", "0", "--timing-s", "0.2", "--db", db, cwd=tmp)
    assert done.returncode == 0, done.stderr[-3000:]
    return db


def test_export_holds_reference_kernel_llm_call_and_evaluations_and_loads_in_pandas_and_datasets(llm_store, tmp_path):
    done = cli("dataset", "export", "--out", str(tmp_path / "ds"), "--db", llm_store, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    records = read_records(tmp_path / "ds" / "kernels.jsonl")
    by_source = {r["candidate_source"]: r for r in records}
    assert set(by_source) == {WRONG, GOOD}
    good, wrong = by_source[GOOD], by_source[WRONG]
    assert good["schema_version"] == SCHEMA_VERSION and good["task_name"] == "relu" and "torch.relu" in \
        good["reference_source"]
    # The module's own benchmark shape (native-scale since the built-in tasks grew; the interpreter uses a smaller one).
    assert good["task_inputs"] == [{"shape": [3968, 2048], "dtype": "float32"}] and good["task_ops"] == ["relu"]
    assert good["backend"] == "triton" and good["evaluations"][0]["backend"] == "triton"
    assert good["best_device"] == good["evaluations"][0]["device"] and wrong["best_device"] is None
    assert good["correct"] and good["best_speedup"] > 0 and good["evaluations"][0]["status"] == "ok"
    assert good["parents"] == [wrong["candidate_digest"]] and good["llm"]["role"] == "coder:refine"
    assert wrong["llm"]["reply"].startswith("<think>start simple</think>")  # reasoning kept
    assert not wrong["correct"] and wrong["evaluations"][0]["status"] == "incorrect"
    info = json.loads((tmp_path / "ds" / "dataset_info.json").read_text())
    assert info["records"] == 2 and info["schema_version"] == SCHEMA_VERSION

    import datasets
    import pandas

    frame = pandas.read_json(tmp_path / "ds" / "kernels.jsonl", lines=True)
    assert len(frame) == 2 and set(frame["candidate_digest"]) == {good["candidate_digest"], wrong["candidate_digest"]}
    loaded = datasets.load_dataset("json", data_files=str(tmp_path / "ds" / "kernels.jsonl"), split="train")
    assert loaded.num_rows == 2 and sorted(loaded["correct"]) == [False, True]


def test_parquet_round_trips_and_filters_and_decontamination_apply(llm_store, tmp_path):
    done = cli("dataset", "export", "--out", str(tmp_path / "pq"), "--format", "parquet", "--correct-only",
               "--db", llm_store, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    [record] = read_records(tmp_path / "pq" / "kernels.parquet")
    assert record["candidate_source"] == GOOD and record["evaluations"][0]["status"] == "ok"
    import datasets
    import pandas

    assert len(pandas.read_parquet(tmp_path / "pq" / "kernels.parquet")) == 1
    assert datasets.load_dataset("parquet", data_files=str(tmp_path / "pq" / "kernels.parquet"),
                                 split="train").num_rows == 1
    held_out = cli("dataset", "export", "--out", str(tmp_path / "held"), "--exclude-suite", "tiny", "--db", llm_store,
                   cwd=tmp_path)
    assert held_out.returncode == 0 and (tmp_path / "held" / "kernels.jsonl").read_text() == ""
    fast = cli("dataset", "export", "--out", str(tmp_path / "fast"), "--min-speedup", "1000", "--db", llm_store,
               cwd=tmp_path)
    assert fast.returncode == 0 and "wrote 0 records" in fast.stdout


def test_import_into_another_store_offers_the_kernels_unverified(llm_store, tmp_path):
    cli("dataset", "export", "--out", str(tmp_path / "ds"), "--db", llm_store, cwd=tmp_path)
    other = f"sqlite:///{tmp_path / 'other.db'}"
    done = cli("dataset", "import", str(tmp_path / "ds" / "kernels.jsonl"), "--db", other, cwd=tmp_path)
    assert done.returncode == 0 and "imported 2 new kernels for 1 tasks" in done.stdout
    again = cli("dataset", "import", str(tmp_path / "ds" / "kernels.jsonl"), "--db", other, cwd=tmp_path)
    assert "imported 0 new kernels" in again.stdout and "2 were known" in again.stdout
    store = get_store(other)
    try:
        assert store.archive() == []  # nothing is verified in this store yet
        [(task, _), _] = store.unverified("import")
        offer = archive.find(store, task)
        assert {c.source for _, c in offer.imported_seeds} == {GOOD, WRONG}
        assert all(s["verified"] is False for s in offer.to_json()["seeds"])
    finally:
        store.close()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"schema_version": 1}\n')
    refused = cli("dataset", "import", str(bad), "--db", other, cwd=tmp_path)
    assert refused.returncode == 2 and "not an opforge dataset" in refused.stderr and "Traceback" not in refused.stderr


def _record(reference: str, name: str, kernel: str, backend: str | None) -> dict:
    record = {"schema_version": SCHEMA_VERSION, "reference_source": reference, "task_name": name,
              "candidate_source": kernel, "task_ops": ["relu"], "origin": "llm:m", "backend": backend}
    if backend is None:  # a version-1 record: it named no backend (its kernels were GPU ones)
        record.update(schema_version=1)
        del record["backend"]
    return record


def test_imported_kernels_are_offered_only_to_runs_of_their_backend(tmp_path):
    reference = (ROOT / "benchmarks" / "tiny" / "relu.py").read_text()
    related = reference.replace("class Model", "# a related task\nclass Model")
    kernels = {backend: f"# a {backend} kernel\n" + SEED for backend in ("cpp", "triton", "cuda")}
    records = [_record(reference, "relu", kernels[b], b) for b in ("cpp", "triton", "cuda")]
    records += [_record(reference, "relu", "# version 1\n" + SEED, None),
                _record(related, "relu_related", "# related cpp\n" + SEED, "cpp"),
                _record(related, "relu_related", "# related triton\n" + SEED, "triton")]
    path = tmp_path / "kernels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    store = get_store(f"sqlite:///{tmp_path / 's.db'}")
    try:
        import_records(store, read_records(path))
        task = next(t for t, _ in store.unverified("import") if t.name == "relu")
        assert len(store.unverified("import")) == 6  # `import:cpp` and plain `import` alike

        def offered(backend: str | None) -> tuple[set[str], set[str]]:
            offer = archive.find(store, task, backend=backend)
            return ({c.source.splitlines()[0] for _, c in offer.imported_seeds},
                    {c.source.splitlines()[0] for _, c, _ in offer.imported_inspirations})

        assert offered("cpp") == ({"# a cpp kernel"}, {"# related cpp"})
        assert offered("triton") == ({"# a triton kernel", "# version 1"}, {"# related triton"})
        assert offered("cuda") == ({"# a cuda kernel", "# version 1"}, set())
        assert len(offered(None)[0]) == 2 and len(offered(None)[1]) == 2  # no backend given: no filter (MAX_SEEDS)
    finally:
        store.close()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**records[0], "backend": "fortran"}) + "\n")
    with pytest.raises(DatasetError, match="bad.jsonl: record 1 names the backend 'fortran'"):
        read_records(bad)
