"""`opforge leaderboard [--suite NAME]`: each agent configuration's scores on a suite (see opforge/reports/leaderboard.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks import list_suites
from opforge.cli.flags import add_db_argument, open_store
from opforge.display import format_speedup
from opforge.reports.leaderboard import FAST_P, leaderboard
from opforge.run.progress import format_tokens


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("leaderboard", help="compare agents over a suite: correctness, fast_p, speedup, cost",
                       description="One row per (agent configuration, device, backend: native CPU kernels and GPU kernels are "
                                   "never mixed), from the newest `opforge bench` of "
                                   "each: tasks attempted, correctness rate, fast_p at p = 0, 1, 1.5, 2 (the share of "
                                   "all tasks both correct and more than p times faster than PyTorch), the geometric "
                                   "mean speedup (a task without a correct kernel counts 1.0; times floored at the "
                                   "task's roofline minimum), the mean fraction of the roofline reached, energy and "
                                   "peak memory relative to the reference, and dollars, tokens and worker-minutes per "
                                   "correct kernel, and the rule for PyTorch inside the kernels each bench ran under (kernels-do-the-work, "
                                   "kernels-only or allow-torch; see docs/EVALUATOR.md).")
    p.add_argument("--suite", help="only this suite (a built-in name or the folder a bench ran on)")
    add_db_argument(p)
    p.add_argument("--json", action="store_true", help='print one JSON object: {"rows": [...]}')
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    store = open_store(args.db)
    suite = args.suite
    if suite is not None and suite not in list_suites() and Path(suite).expanduser().exists():
        suite = str(Path(suite).expanduser().resolve())
    try:
        rows = leaderboard(store, suite)
    finally:
        store.close()
    if args.json:
        print(json.dumps({"suite": suite, "rows": [r.to_json() for r in rows]}))
        return 0
    if not rows:
        print(f"no benches{' of ' + suite if suite else ''} yet; run one with: opforge bench --suite tiny")
        return 0
    fast = "  ".join(f"{'fast_' + format(p, 'g'):>8}" for p in FAST_P)
    print(f"{'suite':<10} {'agent':<30} {'device':<24} {'backend':<7} {'tasks':>5} {'correct':>8}  {fast}  "
          f"{'geomean':>8} {'roofline':>8}  {'energy':>6} {'memory':>6}  {'$/ok':>8} {'tok/ok':>7} {'workmin/ok':>9}  "
          f"{'pytorch rule'}")
    for r in rows:
        per = r.per_correct()
        fp = "  ".join(f"{r.fast_p[format(p, 'g')]:>8.0%}" for p in FAST_P)
        ratio = lambda x: "-" if x is None else f"{x:.2f}x"  # noqa: E731
        pct = lambda x: "-" if x is None else f"{x:.0%}"  # noqa: E731
        money = "-" if per["usd"] is None else f"{per['usd']:.4f}"
        toks = "-" if per["tokens"] is None else format_tokens(round(per["tokens"]))
        gpu = "-" if per["worker_minutes"] is None else f"{per['worker_minutes']:.2f}"
        print(f"{_short(r.suite, 10):<10} {_short(r.agent, 30):<30} {_short(r.device, 24):<24} {r.backend:<7} "
              f"{r.attempted:>5} {r.correctness_rate:>8.0%}  {fp}  {format_speedup(r.geomean_speedup):>8} "
              f"{pct(r.mean_roofline_fraction):>8}  {ratio(r.mean_energy_ratio):>6} {ratio(r.mean_memory_ratio):>6}  "
              f"{money:>8} {toks:>7} {gpu:>9}  {r.torch_rule}")
    return 0


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else "…" + text[-(width - 1):]
