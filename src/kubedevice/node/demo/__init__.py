"""`kubedevice demo`: the node's stories, played with real processes in a temporary root.

The daemon, two fake device plugins and a fake DRA driver run as subprocesses; every step waits on a
condition read from the status API, with a deadline, and fails with one clear line when the condition is
not met. Everything started is killed and the temporary root removed, whatever happens.

:mod:`.script` is the machinery every story uses, :mod:`.device_plugins` and :mod:`.dra` the stories.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from pathlib import Path

from rich.console import Console

from kubedevice.console import make_console
from kubedevice.node.demo.device_plugins import play_device_plugins
from kubedevice.node.demo.dra import play_dra
from kubedevice.node.demo.script import Demo, DemoError
from kubedevice.statusapi.client import StatusClientError

#: The demo's last lines: the same story by hand (from a clone, with the venv on PATH).
TRY_IT_YOURSELF = """
try it yourself (from a clone of the repository, after `. .venv/bin/activate`):
  kubedevice node --root-dir /tmp/kd &
  kubedevice plugin fake --resource example.com/gpu --devices 4 --plugin-dir /tmp/kd/device-plugins &
  kubedevice status --root-dir /tmp/kd --wait-for example.com/gpu
  cp examples/pods/one-gpu.yaml /tmp/kd/manifests/     # then: kubedevice pods --root-dir /tmp/kd
"""


async def _main(console: Console) -> int:
    root = Path(tempfile.mkdtemp(prefix="kubedevice-demo-", dir="/tmp"))
    demo = Demo(root, console)
    try:
        await play_device_plugins(demo)
        await play_dra(demo)
    except (DemoError, StatusClientError) as err:
        demo.tail_logs()
        console.print(f"[red]demo failed:[/red] {err}", highlight=False, soft_wrap=True)
        return 1
    finally:
        with contextlib.suppress(Exception):
            await demo.cleanup()
        shutil.rmtree(root, ignore_errors=True)
    console.print(
        "\n[bold green]demo finished[/bold green]: every story ended as the kubelet's would.", soft_wrap=True
    )
    console.print(TRY_IT_YOURSELF, highlight=False, soft_wrap=True, markup=False)
    return 0


def run_demo() -> int:
    console = make_console()
    try:
        return asyncio.run(_main(console))
    except KeyboardInterrupt:
        console.print("demo interrupted; everything it started was stopped")
        return 1
