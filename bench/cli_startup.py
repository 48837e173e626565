"""Scenario "cli-startup": how long each `kubedevice` command takes to start, as a fresh process.

What a user and a script meet first: `kubedevice --help`, `--version`, `kubedevice status` (here against a
root where no daemon runs, so the figure is the start and the one failed connect, not the daemon's
answer), and every command's `--help`, which imports that command's module and nothing else. Each
figure is the median of its runs; runs of different commands alternate, so a load spike on the shared
machine is spread over all of them.

The package is byte-compiled first, as pip does when it installs it (see the restart scenario): an
editable install under PYTHONDONTWRITEBYTECODE would compile every imported module on each start.
"""

from __future__ import annotations

import asyncio
import compileall
import time
from pathlib import Path

import kubedevice
from bench.common import CLI, Figures, Scale, Target, short_tempdir

NAME = "cli-startup"
#: At least this many runs per command: one start is a few tens of milliseconds, noisy on its own (the
#: short run takes a median of 3 to stay short; the quick run, one).
MIN_RUNS = 7
ROUNDS = {Scale.QUICK: 1, Scale.SHORT: 3, Scale.FULL: MIN_RUNS}
TARGET_S = 0.3
TOOLS = (
    "checkpoint",
    "conformance",
    "demo",
    "exporter",
    "node",
    "plugin",
    "podresources",
    "pods",
    "status",
    "top",
)


def commands(root: Path) -> dict[str, tuple[str, ...]]:
    """Figure name -> the arguments after `kubedevice`."""
    out: dict[str, tuple[str, ...]] = {
        "kubedevice --help": ("--help",),
        "kubedevice --version": ("--version",),
        "kubedevice status (no daemon)": ("status", "--root-dir", str(root)),
    }
    out.update({f"kubedevice {tool} --help": (tool, "--help") for tool in TOOLS})
    return out


async def start_once(args: tuple[str, ...]) -> float:
    """Seconds from spawning `kubedevice ARGS` to its exit (its output is read, as a terminal would)."""
    start = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *CLI, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    elapsed = time.perf_counter() - start
    if b"Traceback" in err or not (out or err):
        raise RuntimeError(f"kubedevice {' '.join(args)} printed nothing or failed: {err.decode()[-500:]}")
    return elapsed


async def run(*, scale: Scale, runs: int) -> Figures:
    figures = Figures(NAME)
    await asyncio.to_thread(compileall.compile_dir, Path(kubedevice.__file__).parent, quiet=1)
    quick = scale is Scale.QUICK
    rounds = max(runs, ROUNDS[scale])
    with short_tempdir() as root:
        table = commands(root)
        if quick:
            table = {name: args for name, args in table.items() if "--help" not in args[1:]}
        for _ in range(rounds):
            for name, args in table.items():
                judged = name in ("kubedevice --help", "kubedevice status (no daemon)")
                figures.add(name, await start_once(args), "s", target=Target(TARGET_S) if judged else None)
    return figures
