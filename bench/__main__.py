"""`python -m bench`: run the scenarios, print the table, write bench/results.json.

python -m bench                      every scenario once at the sizes the README quotes (`make bench`)
python -m bench --full               every scale target, 3 runs per figure (`make bench-full`)
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
from typing import NoReturn

from rich.console import Console
from rich.table import Table

from bench import (
    admission,
    cli_startup,
    daemon_admission,
    daemon_dra,
    dra_allocator,
    dra_prepare,
    exporter,
    listwatch,
    memory,
    pod_latency,
    reregistration,
    restart,
    topology,
)
from bench.common import Figure, Figures, Scale, Target, fmt

Scenario = Callable[..., Awaitable[Figures]]
SCENARIOS: dict[str, Scenario] = {
    listwatch.NAME: listwatch.run,
    admission.NAME: admission.run,
    dra_prepare.NAME: dra_prepare.run,
    dra_allocator.NAME: dra_allocator.run,
    daemon_admission.NAME: daemon_admission.run,
    daemon_dra.NAME: daemon_dra.run,
    pod_latency.NAME: pod_latency.run,
    restart.NAME: restart.run,
    reregistration.NAME: reregistration.run,
    memory.NAME: memory.run,
    exporter.NAME: exporter.run,
    topology.NAME: topology.run,
    cli_startup.NAME: cli_startup.run,
}
RESULTS = Path(__file__).with_name("results.json")


def table(figures: list[Figure], before: dict[tuple[str, str], float] | None = None) -> Table:
    t = Table(title="kubedevice bench: median of the runs, with min and max")
    columns = ["scenario", "figure", "median", "min - max", "n", "target", "ok", "kubelet", "note"]
    if before is not None:
        columns.insert(2, "before")
    for column in columns:
        t.add_column(column, justify="right" if column in ("before", "median", "min - max", "n") else "left")
    for f in figures:
        ok = {True: "yes", False: "MISS", None: ""}[f.met]
        row = [
            f.scenario,
            f.name,
            f"{fmt(f.median)} {f.unit}",
            f"{fmt(min(f.samples))} - {fmt(max(f.samples))}",
            str(len(f.samples)),
            f.target.describe(f.unit) if f.target else "",
            ok,
            f.kubelet or "",
            f.note or "",
        ]
        if before is not None:
            earlier = before.get((f.scenario, f.name))
            row.insert(2, f"{fmt(earlier)} {f.unit}" if earlier is not None else "")
        t.add_row(*row)
    return t


def read_results(path: Path) -> list[Figure]:
    """The figures of a results file written by an earlier run."""
    try:
        document = json.loads(path.read_text())
        return [
            Figure(
                f["scenario"],
                f["name"],
                f["unit"],
                list(f["samples"]),
                target=_parse_target(f.get("target")),
                kubelet=f.get("kubelet"),
                note=f.get("note"),
            )
            for f in document["figures"]
        ]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise SystemExit(f"error: cannot read bench results {path}: {err}") from None


def _parse_target(text: str | None) -> Target | None:
    if not text:
        return None
    sign, value, _unit = text.split(" ", 2)
    return Target(float(value.replace(",", "")), "higher" if sign == ">=" else "lower")


async def run_all(
    names: list[str], scale: Scale, runs: int, save: Callable[[list[Figure]], None]
) -> list[Figure]:
    out: list[Figure] = []
    for name in names:
        started = time.perf_counter()
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        figures = await SCENARIOS[name](scale=scale, runs=runs)
        print(f"[bench] {name} done in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
        out.extend(figures)
        save(out)  # a long run that is stopped still leaves the scenarios it finished
    return out


def write_results(path: Path, figures: list[Figure], scale: Scale, runs: int, seconds: float) -> None:
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "system": platform.platform()}
    document = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "quick": scale is Scale.QUICK,
        "scale": scale.value,
        "runs": runs,
        "machine": machine,
        "seconds": seconds,
        "figures": [f.to_json() for f in figures],
    }
    path.write_text(json.dumps(document, indent=2) + "\n")


class _OneLineParser(argparse.ArgumentParser):
    """Bad arguments: one line on stderr and exit code 2, like the kubedevice CLI."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message}\n")


def main(argv: list[str] | None = None) -> int:
    parser = _OneLineParser(prog="python -m bench", description=__doc__.splitlines()[0])
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--quick", action="store_true", help="tiny sizes and one run: checks the harness")
    sizes.add_argument("--full", action="store_true", help="every scale target, 3 runs per figure (minutes)")
    parser.add_argument("--only", action="append", choices=sorted(SCENARIOS), help="run only this scenario")
    parser.add_argument("--runs", type=int, default=None, help="runs per figure (default 1, 3 with --full)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"results file (default {RESULTS})")
    parser.add_argument("--show", type=Path, help="print the table of an earlier results file; run nothing")
    parser.add_argument("--compare", type=Path, help="an earlier results file to show in a 'before' column")
    args = parser.parse_args(argv)
    before = (
        {(f.scenario, f.name): f.median for f in read_results(args.compare) if f.samples}
        if args.compare is not None
        else None
    )
    if args.show is not None:
        Console(width=220).print(table(read_results(args.show), before))
        return 0
    scale = Scale.QUICK if args.quick else Scale.FULL if args.full else Scale.SHORT
    runs = args.runs if args.runs is not None else scale.runs
    if runs < 1:
        parser.error(f"--runs must be at least 1, got {runs}")
    names = args.only or list(SCENARIOS)
    logging.basicConfig(level=logging.ERROR)
    started = time.perf_counter()

    def save(figures: list[Figure]) -> None:
        write_results(args.out, figures, scale, runs, time.perf_counter() - started)

    figures = asyncio.run(run_all(names, scale, runs, save))
    Console(width=220).print(table(figures, before))
    print(f"[bench] results written to {args.out}", file=sys.stderr)
    judged = [f for f in figures if f.met is not None]
    print(f"[bench] {sum(1 for f in judged if f.met)} of {len(judged)} targets met", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
