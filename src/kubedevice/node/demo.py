"""`kubedevice demo`: the device manager's stories, played with real processes in a temporary root.

The daemon and two fake plugins run as subprocesses; every step waits on a condition read from the
status API, with a deadline, and fails with one clear line when the condition is not met. Everything
started is killed and the temporary root removed, whatever happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from kubedevice.console import make_console
from kubedevice.node.demo_dra import DemoDRAError, play_dra
from kubedevice.statusapi.http import StatusClientError, get
from kubedevice.statusapi.paths import NodePaths
from kubedevice.statusapi.tables import print_node, print_pods

GPU = "example.com/gpu"
NIC = "example.com/nic"
STEP_DEADLINE_S = 15.0
_POLL_S = 0.1
_CLI = ("-c", "from kubedevice.cli import run; run()")

_FITS = f"""apiVersion: v1
kind: Pod
metadata:
  name: trainer
  namespace: demo
spec:
  containers:
  - name: train
    resources:
      limits:
        {GPU}: 1
        {NIC}: 1
"""
#: Three GPUs: no single NUMA node of the demo's machine (two GPUs each) can hold them.
_WIDE = f"""apiVersion: v1
kind: Pod
metadata:
  name: wide
  namespace: demo
spec:
  containers:
  - name: main
    resources:
      limits:
        {GPU}: 3
"""
#: The demo's machine: two NUMA nodes, each with two GPUs and one NIC.
_NUMA = ("--numa-nodes", "2")


class DemoError(Exception):
    """A step of the demo did not reach its condition; str() is the one line to print."""


class _Demo:
    def __init__(self, root: Path, console: Console) -> None:
        self.root = root
        self.paths = NodePaths.under(root)
        self.console = console
        self.daemon: asyncio.subprocess.Process | None = None
        self.plugins: dict[str, asyncio.subprocess.Process] = {}
        self._logs: list[Any] = []

    def say(self, text: str) -> None:
        self.console.print(f"\n[bold]==>[/bold] {text}", highlight=False, soft_wrap=True)

    async def _spawn(self, name: str, *args: str) -> asyncio.subprocess.Process:
        # Closed in cleanup, once the process has ended.
        log = await asyncio.to_thread(open, self.root / f"{name}.log", "ab")
        self._logs.append(log)
        return await asyncio.create_subprocess_exec(
            sys.executable, *_CLI, *args, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log
        )

    async def start_daemon(self, policy: str = "single-numa-node") -> None:
        self.daemon = await self._spawn(
            "daemon",
            "node",
            "--root-dir",
            str(self.root),
            "--stop-grace-period",
            "2s",
            *_NUMA,
            "--topology-manager-policy",
            policy,
        )
        await self.until("the node daemon answers", lambda: self.node_has(lambda d: True))

    async def start_plugin(self, resource: str) -> None:
        name = resource.split("/")[1]
        args = ["plugin", "fake", "--resource", resource, "--plugin-dir", str(self.paths.plugin_dir)]
        args += ["--devices", "4", *_NUMA, "--preferred"] if resource == GPU else ["--devices", "2", *_NUMA]
        self.plugins[resource] = await self._spawn(f"plugin-{name}", *args, "--poll-interval", "0.2")

    async def kill(self, process: asyncio.subprocess.Process | None) -> None:
        if process is None or process.returncode is not None:
            return
        process.kill()
        await process.wait()

    async def status(self, path: str) -> Any:
        return json.loads(await get(self.paths.status_socket, path, wait=2.0))

    async def node_has(self, predicate: Callable[[dict[str, Any]], bool]) -> bool:
        try:
            return predicate(await self.status("/node"))
        except StatusClientError:
            return False

    async def pods_have(self, predicate: Callable[[list[dict[str, Any]]], bool]) -> bool:
        try:
            return predicate((await self.status("/pods"))["pods"])
        except StatusClientError:
            return False

    async def pod_is(
        self, name: str, phase: str, also: Callable[[dict[str, Any]], bool] = lambda _pod: True
    ) -> bool:
        """Whether pod `name` is in `phase` (and `also` holds for it)."""
        return await self.pods_have(
            lambda pods: any(p.get("name") == name and p.get("phase") == phase and also(p) for p in pods)
        )

    async def until(self, what: str, condition: Callable[[], Awaitable[bool]]) -> None:
        deadline = time.monotonic() + STEP_DEADLINE_S
        while not await condition():
            if self.daemon is not None and self.daemon.returncode is not None:
                raise DemoError(
                    f"the node daemon exited with code {self.daemon.returncode} while waiting: {what}"
                )
            if time.monotonic() > deadline:
                raise DemoError(f"timed out after {STEP_DEADLINE_S:g}s waiting: {what}")
            await asyncio.sleep(_POLL_S)
        self.console.print(f"    ok: {what}", highlight=False, soft_wrap=True)

    async def show(self, *, node: bool = False, pods: bool = False) -> None:
        """The tables a story is about, each at most once per story: the output stays a story."""
        if node:
            print_node(self.console, await self.status("/node"))
        if pods:
            print_pods(self.console, await self.status("/pods"))

    async def trainer_devices(self) -> dict[str, Any]:
        """trainer's devices and the NUMA hint the topology manager chose for it."""
        for pod in (await self.status("/pods"))["pods"]:
            if pod.get("name") == "trainer":
                container = pod["containers"][0]
                return {**container["devices"], "hint": container["topologyHint"]}
        raise DemoError("pod demo/trainer is missing from /pods")

    async def aligned(self, name: str) -> bool:
        """Whether every device of pod `name` is on the single NUMA node of its hint."""
        numa = {r: info["numaNodes"] for r, info in (await self.status("/node"))["resources"].items()}
        for pod in (await self.status("/pods"))["pods"]:
            if pod.get("name") == name and pod.get("phase") == "Running":
                container = pod["containers"][0]
                nodes = {n for r, ids in container["devices"].items() for d in ids for n in numa[r][d]}
                hint = container["topologyHint"] or {}
                return len(nodes) == 1 and hint.get("numaNodes") == sorted(nodes)
        return False

    async def restart_daemon(self, policy: str = "single-numa-node") -> None:
        assert self.daemon is not None
        self.daemon.send_signal(signal.SIGKILL)
        await self.daemon.wait()
        await self.start_daemon(policy)

    async def cleanup(self) -> None:
        for process in [*self.plugins.values(), self.daemon]:
            await self.kill(process)
        for log in self._logs:
            log.close()

    def tail_logs(self) -> None:
        for log_path in sorted(self.root.glob("*.log")):
            lines = log_path.read_text(errors="replace").splitlines()[-8:]
            if lines:
                self.console.print(f"--- last lines of {log_path.name}", highlight=False, soft_wrap=True)
                for line in lines:
                    self.console.print(line, highlight=False, markup=False)


#: The demo's last lines: the same story by hand (from a clone, with the venv on PATH).
TRY_IT_YOURSELF = """
try it yourself (from a clone of the repository, after `. .venv/bin/activate`):
  kubedevice node --root-dir /tmp/kd &
  kubedevice plugin fake --resource example.com/gpu --devices 4 --plugin-dir /tmp/kd/device-plugins &
  kubedevice status --root-dir /tmp/kd --wait-for example.com/gpu
  cp examples/pods/one-gpu.yaml /tmp/kd/manifests/     # then: kubedevice pods --root-dir /tmp/kd
"""


def _capacity(d: dict[str, Any], resource: str) -> int | None:
    value = d["capacity"].get(resource)
    return int(value) if value is not None else None


async def _play(demo: _Demo) -> None:
    demo.say(f"Starting the node daemon in {demo.root} and two fake device plugins")
    await demo.start_daemon()
    await demo.start_plugin(GPU)
    await demo.start_plugin(NIC)
    await demo.until(
        "both plugins registered: 4 GPUs on 2 NUMA nodes, 2 NICs",
        lambda: demo.node_has(lambda d: _capacity(d, GPU) == 4 and _capacity(d, NIC) == 2),
    )

    demo.say(
        "The node runs --topology-manager-policy single-numa-node on 2 NUMA nodes (2 GPUs and 1 NIC each). "
        "Dropping two pods into the manifest folder: a GPU + NIC pod, and one asking for 3 GPUs"
    )
    (demo.paths.manifests / "trainer.yaml").write_text(_FITS)
    (demo.paths.manifests / "wide.yaml").write_text(_WIDE)
    await demo.until(
        "trainer is Running with its GPU and NIC on one NUMA node",
        lambda: demo.aligned("trainer"),
    )
    await demo.until(
        "wide is Failed (TopologyAffinityError): no single NUMA node holds 3 GPUs",
        lambda: demo.pod_is("wide", "Failed", lambda p: p.get("reason") == "TopologyAffinityError"),
    )
    await demo.show(node=True, pods=True)
    before = await demo.trainer_devices()

    demo.say("Story 1: the kubelet restarts. SIGKILL the daemon, start it again")
    await demo.restart_daemon()
    await demo.until(
        "trainer kept its devices and NUMA hint from the checkpoint, without a new allocation",
        lambda: demo.pod_is("trainer", "Running"),
    )
    if await demo.trainer_devices() != before:
        raise DemoError(
            f"trainer's devices changed across the restart: {before} -> {await demo.trainer_devices()}"
        )
    await demo.until(
        "the plugins saw kubelet.sock come back, registered again, and capacity returned",
        lambda: demo.node_has(
            lambda d: _capacity(d, GPU) == 4 and _capacity(d, NIC) == 2 and d["allocatable"].get(GPU) == 4
        ),
    )
    await demo.show(pods=True)

    demo.say("Story 2: the NIC plugin dies")
    await demo.kill(demo.plugins[NIC])
    await demo.until(
        "its devices are unhealthy: allocatable 0, capacity kept",
        lambda: demo.node_has(lambda d: _capacity(d, NIC) == 2 and d["allocatable"].get(NIC) == 0),
    )
    await demo.show(node=True)
    await demo.until(
        "after the 2s stop grace period the resource left capacity",
        lambda: demo.node_has(lambda d: NIC not in d["capacity"]),
    )
    demo.say("The NIC plugin comes back")
    await demo.start_plugin(NIC)
    await demo.until(
        "it registered again: capacity and allocatable are back",
        lambda: demo.node_has(lambda d: _capacity(d, NIC) == 2 and d["allocatable"].get(NIC) == 2),
    )
    if await demo.trainer_devices() != before:
        raise DemoError("trainer's devices changed while its plugin was away")
    demo.console.print(
        "    ok: trainer kept its NIC all along (devices stay allocated across plugin restarts)",
        soft_wrap=True,
    )

    demo.say(
        "Story 3: the same node under --topology-manager-policy best-effort; wide is dropped in again, "
        "changed (a pod's UID hashes what it says: a comment alone would leave it Failed)"
    )
    await demo.restart_daemon("best-effort")
    await demo.until("trainer is Running again", lambda: demo.pod_is("trainer", "Running"))
    await demo.until(
        "the plugins registered again",
        lambda: demo.node_has(lambda d: d["allocatable"].get(GPU) == 4 and d["allocatable"].get(NIC) == 2),
    )
    again = _WIDE.replace("  namespace: demo\n", "  namespace: demo\n  labels: {attempt: '2'}\n")
    await asyncio.to_thread((demo.paths.manifests / "wide.yaml").write_text, again)
    await demo.until(
        "best-effort admits wide across both NUMA nodes (hint 0,1)",
        lambda: demo.pod_is(
            "wide", "Running", lambda p: (p["containers"][0]["topologyHint"] or {}).get("numaNodes") == [0, 1]
        ),
    )
    await demo.show(pods=True)
    await play_dra(demo)


async def _main(console: Console) -> int:
    root = Path(tempfile.mkdtemp(prefix="kubedevice-demo-", dir="/tmp"))
    demo = _Demo(root, console)
    try:
        await _play(demo)
    except (DemoError, DemoDRAError, StatusClientError) as err:
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
