"""`kubedevice top`: the frame, refreshed every second until `q` or Ctrl-C; one frame when not a terminal.

Errors are one line on stderr with exit 2, for bad arguments as for a source that cannot be read in
one-frame mode (no daemon at --root-dir, no socket at --socket), as in `status` and `podresources`. In live
mode a source that stops answering is shown in the frame and retried every second.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import termios
import time
import tty
from collections.abc import Iterator

import typer
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.text import Text

from kubedevice.console import columns_asked
from kubedevice.options import ROOT_HELP, fail, root_option
from kubedevice.top.frame import render
from kubedevice.top.model import TopView
from kubedevice.top.sources import PodResourcesSource, Source, StatusSource, TopSourceError

REFRESH_S = 1.0
#: The width of the one frame printed when stdout is not a terminal and `COLUMNS` is not set: the frame is
#: laid out for it.
FRAME_WIDTH = 80


def top(
    # Text, not Path: typer would turn "" into ".", the current folder.
    root_dir: str | None = typer.Option(None, "--root-dir", help=ROOT_HELP, metavar="PATH"),
    socket: str | None = typer.Option(
        None,
        "--socket",
        help="Read any PodResources v1 socket instead (a real kubelet's: health partly unknown).",
    ),
) -> None:
    """Live view of the node's devices per resource and NUMA node: free, held (by which pod), unhealthy."""
    if root_dir is not None and socket is not None:
        fail("top: --root-dir and --socket are alternatives — pass one of them")
    source: Source = PodResourcesSource(socket) if socket is not None else StatusSource(root_option(root_dir))
    if not sys.stdout.isatty():
        try:
            view = asyncio.run(source.fetch())
        except TopSourceError as err:
            fail(f"top: {err}")
        Console(width=columns_asked() or FRAME_WIDTH).print(render(view))
        return
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_live(source, Console()))


def _frame(view: TopView | None, error: str | None) -> RenderableType:
    footer = Text(f"{time.strftime('%H:%M:%S')}  refreshing every {REFRESH_S:g}s · q or Ctrl-C quits", "dim")
    parts: list[RenderableType] = []
    if view is not None:
        parts.append(render(view))
    if error is not None:
        suffix = " (showing the last answer)" if view is not None else ""
        parts.append(Text(f"error: {error}{suffix}", style="bold red"))
    parts.append(footer)
    return Group(*parts)


async def _live(source: Source, console: Console) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    view: TopView | None = None
    with _keys(loop, stop), Live(console=console, auto_refresh=False, screen=True) as live:
        while not stop.is_set():
            error = None
            try:
                view = await source.fetch()
            except TopSourceError as err:
                error = str(err)
            live.update(_frame(view, error), refresh=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), REFRESH_S)


@contextlib.contextmanager
def _keys(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> Iterator[None]:
    """Single key presses without Enter (cbreak: Ctrl-C still signals); the terminal is restored after."""
    if not sys.stdin.isatty():
        yield
        return
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)

    def on_key() -> None:
        try:
            data = os.read(fd, 64)
        except OSError:
            data = b""
        if not data or b"q" in data.lower():
            stop.set()

    try:
        tty.setcbreak(fd)
        loop.add_reader(fd, on_key)
        yield
    finally:
        loop.remove_reader(fd)
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def register(app: typer.Typer) -> None:
    """Add `top` to the `kubedevice` command."""
    app.command("top")(top)
