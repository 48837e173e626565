"""`python -m bench`: run the scenarios, print the table, write bench/results.json.

python -m bench                      every scenario, 3 runs per figure
python -m bench --quick              tiny sizes, 1 run: checks the harness, measures nothing useful
python -m bench --only admission     one scenario (repeat --only for several)
"""

from __future__ import annotations

import os

# Before grpc is imported: its INFO lines about closed streams would bury the table.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

import argparse
import asyncio
import json
import logging
import platform
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench import admission, daemon_admission, listwatch, memory, reregistration, restart
from bench.common import Figure, Figures, fmt

Scenario = Callable[..., Awaitable[Figures]]
SCENARIOS: dict[str, Scenario] = {
    listwatch.NAME: listwatch.run,
    admission.NAME: admission.run,
    daemon_admission.NAME: daemon_admission.run,
    restart.NAME: restart.run,
    reregistration.NAME: reregistration.run,
    memory.NAME: memory.run,
}
RESULTS = Path(__file__).with_name("results.json")


def table(figures: list[Figure]) -> Table:
    t = Table(title="kubedevice bench: median of the runs, with min and max")
    for column in ("scenario", "figure", "median", "min - max", "n", "target", "ok", "kubelet", "note"):
        t.add_column(column, justify="right" if column in ("median", "min - max", "n") else "left")
    for f in figures:
        ok = {True: "yes", False: "MISS", None: ""}[f.met]
        t.add_row(
            f.scenario,
            f.name,
            f"{fmt(f.median)} {f.unit}",
            f"{fmt(min(f.samples))} - {fmt(max(f.samples))}",
            str(len(f.samples)),
            f.target.describe(f.unit) if f.target else "",
            ok,
            f.kubelet or "",
            f.note or "",
        )
    return t


async def run_all(names: list[str], quick: bool, runs: int) -> list[Figure]:
    out: list[Figure] = []
    for name in names:
        started = time.perf_counter()
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        figures = await SCENARIOS[name](quick=quick, runs=runs)
        print(f"[bench] {name} done in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
        out.extend(figures)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes and one run: checks the harness")
    parser.add_argument("--only", action="append", choices=sorted(SCENARIOS), help="run only this scenario")
    parser.add_argument("--runs", type=int, default=None, help="runs per figure (default 3, 1 with --quick)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"results file (default {RESULTS})")
    args = parser.parse_args(argv)
    runs = args.runs if args.runs is not None else (1 if args.quick else 3)
    if runs < 1:
        parser.error(f"--runs must be at least 1, got {runs}")
    names = args.only or list(SCENARIOS)
    logging.basicConfig(level=logging.ERROR)
    started = time.perf_counter()
    figures = asyncio.run(run_all(names, args.quick, runs))
    Console(width=200).print(table(figures))
    args.out.write_text(
        json.dumps(
            {
                "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "quick": args.quick,
                "runs": runs,
                "machine": {
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "system": platform.platform(),
                },
                "seconds": time.perf_counter() - started,
                "figures": [f.to_json() for f in figures],
            },
            indent=2,
        )
        + "\n"
    )
    print(f"[bench] results written to {args.out}", file=sys.stderr)
    judged = [f for f in figures if f.met is not None]
    print(f"[bench] {sum(1 for f in judged if f.met)} of {len(judged)} targets met", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
