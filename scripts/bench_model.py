"""End-to-end figure of a patched model: eager, torch.compile, patched, patched + torch.compile.

    python scripts/bench_model.py MODEL.py --package PKG_DIR [--name opforge_model] [--rounds 20] [--no-compile]
                                  [--html report.html] [--json]

PKG_DIR is what `opforge model export` wrote. Outputs are compared with eager's on fresh inputs within the swapped
tasks' tolerances before anything is timed (exit status 1 if one differs); then the variants are timed in
interleaved rounds on fresh inputs. Run it under the heavy lock for figures (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from opforge.model.endtoend import OutputMismatch, html, import_package, measure  # noqa: E402
from opforge.model.loading import ModelError, load_model  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", help="the model file")
    p.add_argument("--package", required=True, metavar="PKG_DIR", help="the folder `opforge model export` wrote")
    p.add_argument("--name", default="opforge_model", help="the package's import name (default opforge_model)")
    p.add_argument("--rounds", type=int, default=20, help="timed rounds (default 20)")
    p.add_argument("--no-compile", action="store_true", help="leave out the torch.compile variants")
    p.add_argument("--html", metavar="FILE", help="write the report page here")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = p.parse_args(argv)
    try:
        loaded = load_model(Path(args.model))
    except ModelError as exc:
        print(f"bench_model: {exc}", file=sys.stderr)
        return 2
    package = import_package(Path(args.package), args.name)
    try:
        figures = measure(loaded, package, rounds=args.rounds, with_compile=not args.no_compile)
    except OutputMismatch as exc:
        print(f"bench_model: {args.model}: {exc}", file=sys.stderr)
        return 1
    if args.html:
        Path(args.html).write_text(html(figures), encoding="utf-8")
    if args.json:
        print(json.dumps(figures.to_json()))
        return 0
    print(figures.text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
