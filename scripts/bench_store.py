"""Benchmark the store's read paths on a large run: fill 100,000 candidates with verdicts, then time top_k, the
history that a resume rebuilds the population from, and the resume itself (requeue + claim).

    .venv/bin/python scripts/bench_store.py                                   # SQLite file in a temporary folder
    .venv/bin/python scripts/bench_store.py --db postgresql://postgres@127.0.0.1:5432/test

On PostgreSQL the data goes into a scratch schema that is dropped afterwards (--keep keeps it).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluator.candidate import Candidate  # noqa: E402
from evaluator.result import DeviceInfo, EvalResult, Status, Timing  # noqa: E402
from evaluator.task import task_from_source  # noqa: E402
from store import get_store  # noqa: E402
from store.engine import resolve_url  # noqa: E402

DEVICE = DeviceInfo(kind="cuda", name="NVIDIA H100 80GB HBM3", driver="560.35", torch_version="2.11.0")
KERNEL = '''import torch, triton, triton.language as tl

@triton.jit
def softmax_kernel(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):  # variant {i}
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * n_cols + offs, mask=offs < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * n_cols + offs, num / tl.sum(num, axis=0), mask=offs < n_cols)

class ModelNew(torch.nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](out, x, x.shape[1], BLOCK={block}, num_warps={warps})
        return out
'''
TASK = (
    "import torch\nclass Model(torch.nn.Module):\n    pass\n"
    "def get_inputs(): return []\ndef get_init_inputs(): return []\n"
)


def fake_result(rng: random.Random) -> EvalResult:
    roll = rng.random()
    if roll < 0.7:
        cand = rng.uniform(0.05, 2.0)
        return EvalResult(Status.OK, "correct and timed", Timing(cand, cand * 0.02, 100), Timing(1.0, 0.01, 100),
                          max_abs_error=rng.random() * 1e-6, peak_memory_bytes=rng.randrange(1 << 30),
                          profile={"dram__throughput.avg.pct_of_peak": rng.random() * 100}, device=DEVICE,
                          log="timing: 100 reps\n")
    status = Status.INCORRECT if roll < 0.85 else Status.COMPILE_ERROR
    log = "Traceback (most recent call last): ...\n" * 3
    return EvalResult(status, f"verdict {status.value}", device=DEVICE, log=log)


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float, object]:
    samples, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples), min(samples), out


def pg_scratch(url: str) -> tuple[str, str]:
    import psycopg

    schema = f"opforge_bench_{uuid.uuid4().hex[:8]}"
    plain = resolve_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-csearch_path={schema}')}", schema


def drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(resolve_url(url).set(drivername="postgresql").render_as_string(hide_password=False),
                         autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=None, help="database URL (default: a SQLite file in a temporary folder)")
    ap.add_argument("-n", type=int, default=100_000, help="candidates (each with one verdict)")
    ap.add_argument("--batch", type=int, default=5_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="keep the PostgreSQL scratch schema")
    args = ap.parse_args()

    tmp = tempfile.TemporaryDirectory()
    url, schema = args.db or f"sqlite:///{tmp.name}/bench.db", None
    if resolve_url(url).get_backend_name() == "postgresql":
        url, schema = pg_scratch(url)
    rng = random.Random(0)
    store = get_store(url)
    try:
        task = store.add_task(task_from_source(TASK, "softmax"))
        run = store.create_run(task.id, {"strategy": "bench"}, {"max_evals": args.n})
        t0 = time.perf_counter()
        for start in range(0, args.n, args.batch):
            cands = [Candidate.from_source(KERNEL.format(i=i, block=1 << (i % 12), warps=1 << (i % 4)), origin="tune")
                     for i in range(start, min(args.n, start + args.batch))]
            added = store.add_candidates(run.id, task.id, cands, generation=start // 1000, island=start % 4)
            recs = [r for r, _ in added]
            store.enqueue(run.id, [r.id for r in recs])
            done = recs[: len(recs) - 10] if start + args.batch >= args.n else recs  # leave a few in flight
            store.add_results(run.id, [(r.id, fake_result(rng)) for r in done], worker_s=0.5)
        fill_s = time.perf_counter() - t0
        in_flight = store.claim_pending(run.id, 10_000)  # the "crashed" driver's work

        fill_ms = fill_s * 1000
        rows = [("fill: add_candidates + enqueue + add_results", fill_ms, fill_ms, f"{args.n / fill_s:,.0f} cand/s")]
        for label, fn in [
            ("top_k(k=10)", lambda: store.top_k(task.id, 10)),
            ("top_k(k=10, device=H100)", lambda: store.top_k(task.id, 10, device=DEVICE.name)),
            ("top_k(k=100)", lambda: store.top_k(task.id, 100)),
            ("run_totals", lambda: store.run_totals(run.id)),
            ("history (resume rebuild)", lambda: store.history(run.id)),
            ("resume: requeue_in_flight + claim_pending", lambda: (store.requeue_in_flight(run.id),
                                                                    store.claim_pending(run.id, 10_000))),
        ]:
            med, best, out = timed(fn, args.repeat)
            size = len(out) if isinstance(out, list) else (out[0] if isinstance(out, tuple) else "")
            rows.append((label, med, best, f"{size} rows" if size != "" else ""))
        assert len(in_flight) == 10

        print(f"store benchmark: {store.dialect}, {args.n:,} candidates with verdicts, median of {args.repeat}")
        print(f"{'operation':<46} {'median ms':>11} {'min ms':>11}  note")
        for label, med, best, note in rows:
            print(f"{label:<46} {med:>11.1f} {best:>11.1f}  {note}")
    finally:
        store.close()
        if schema and not args.keep:
            drop_schema(url.split("?")[0], schema)
        tmp.cleanup()


if __name__ == "__main__":
    main()
