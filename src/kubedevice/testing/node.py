"""The `node` fixture: the real node daemon (`kubedevice node`) as its own process under a temporary root.

Pods go in as manifest files, written atomically into the daemon's manifest folder; what the daemon
decided is read back from its status API, the way `kubedevice node` users read it.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubedevice.conformance.process import PluginProcess
from kubedevice.durable import replace_file
from kubedevice.node.manifests import parse_manifest
from kubedevice.plugin import Allocation, DevicePlugin, DeviceSpec, Mount, PluginServer
from kubedevice.resource.document_file import ManifestError
from kubedevice.statusapi import contract
from kubedevice.statusapi.client import StatusClient, StatusClientError
from kubedevice.statusapi.paths import NodePaths
from kubedevice.testing.serving import ServedPlugin, serve_plugin

#: The daemon as the installed package runs it, with this interpreter (no script on PATH needed).
DAEMON = (sys.executable, "-c", "from kubedevice.cli import run; run()", "node")
#: How often the status API is asked again while waiting.
POLL_S = 0.05
_SETTLED = ("Running", "Failed", "Succeeded")


@dataclass(frozen=True)
class PodStatus:
    """What the daemon decided for one pod: its phase, the devices of each container and its run options."""

    namespace: str
    name: str
    phase: str
    reason: str = ""
    message: str = ""
    #: Container name -> resource name -> device IDs.
    devices: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    #: Container name -> run options (environment, mounts, device nodes, annotations, CDI devices).
    run_options: dict[str, Allocation] = field(default_factory=dict)


@dataclass(frozen=True)
class NodeStatus:
    """The node's device view: capacity, allocatable and the health of every registered device."""

    capacity: dict[str, int]
    allocatable: dict[str, int]
    healthy: dict[str, tuple[str, ...]]
    unhealthy: dict[str, tuple[str, ...]]
    #: Healthy devices no pod holds, per resource (allocatable, as in the kubelet, does not subtract them).
    free: dict[str, int]
    #: The whole /node answer, for what the fields above leave out.
    raw: dict[str, Any]


class Node:
    """One node daemon process under `root`, and the plugins a test started against it."""

    def __init__(self, root: Path, *args: str, timeout: float = 10.0) -> None:
        self.paths = NodePaths.under(Path(root))
        self.args = tuple(args)
        self.timeout = timeout
        self._process: asyncio.subprocess.Process | None = None
        self._plugin_processes: list[PluginProcess] = []
        self._plugins: list[ServedPlugin[PluginServer]] = []

    @property
    def root(self) -> Path:
        return self.paths.root

    @property
    def plugin_dir(self) -> Path:
        """Where plugins register (kubelet.sock is here): pass it to your plugin."""
        return self.paths.plugin_dir

    @property
    def log_path(self) -> Path:
        return self.root / "node.log"

    async def start(self) -> None:
        """Start the daemon and wait until its status API answers."""
        __tracebackhide__ = True
        if self._process is not None and self._process.returncode is None:
            raise AssertionError("the node daemon is already running")
        log = await asyncio.to_thread(open, self.log_path, "ab")
        try:
            self._process = await asyncio.create_subprocess_exec(
                *DAEMON,
                "--root-dir",
                str(self.root),
                *self.args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
            )
        finally:
            log.close()
        process = self._process
        deadline = asyncio.get_running_loop().time() + self.timeout
        while not await self._answers():
            if process.returncode is not None:
                raise AssertionError(
                    f"the node daemon exited with code {process.returncode} at start: {self._last_log_line()}"
                )
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"the node daemon did not answer within {self.timeout:g} s")
            await asyncio.sleep(POLL_S)

    async def stop(self) -> None:
        """SIGTERM, as a node shutting down; SIGKILL when it has not ended within the timeout."""
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), self.timeout)
        except TimeoutError:
            process.kill()
            await process.wait()

    async def restart(self) -> None:
        """Stop the daemon and start it again on the same root: plugins must register again."""
        __tracebackhide__ = True
        await self.stop()
        await self.start()

    async def close(self) -> None:
        """Stop the plugins the test started, then the daemon."""
        for served in reversed(self._plugins):
            await served.stop()
        for plugin in reversed(self._plugin_processes):
            await plugin.stop(self.timeout)
        await self.stop()

    # -- plugins -------------------------------------------------------------------------------------

    async def start_plugin(self, *command: str) -> PluginProcess:
        """Run a plugin command as its own process, stopped at the end of the test.

        `{plugin_dir}` in its arguments becomes the node's plugin folder, also given as
        $KUBEDEVICE_PLUGIN_DIR; its output goes to plugin-N.log under the root.
        """
        __tracebackhide__ = True
        if not command:
            raise AssertionError("start_plugin: no command given")
        log_path = self.root / f"plugin-{len(self._plugin_processes)}.log"
        plugin = PluginProcess(command, self.plugin_dir, log_path)
        try:
            await plugin.start()
        except OSError as err:
            raise AssertionError(f"start_plugin: cannot run {command[0]!r}: {err.strerror or err}") from None
        self._plugin_processes.append(plugin)
        return plugin

    async def serve_plugin(self, plugin: DevicePlugin, **server_options: object) -> PluginServer:
        """Serve `plugin` in the test's event loop against this daemon, until the test ends."""
        __tracebackhide__ = True
        served = await serve_plugin(plugin, self.plugin_dir, **server_options)
        self._plugins.append(served)
        return served.server

    # -- what the daemon says ------------------------------------------------------------------------

    async def status(self) -> NodeStatus:
        """The node's devices now (capacity, allocatable, healthy and unhealthy IDs per resource)."""
        data = await self._get(contract.NODE)
        resources = data.get("resources", {})
        return NodeStatus(
            capacity=dict(data.get("capacity", {})),
            allocatable=dict(data.get("allocatable", {})),
            healthy={name: tuple(r.get("healthy", ())) for name, r in resources.items()},
            unhealthy={name: tuple(r.get("unhealthy", ())) for name, r in resources.items()},
            free={name: int(r.get("free", 0)) for name, r in resources.items()},
            raw=data,
        )

    async def wait_allocatable(self, resource: str, count: int, timeout: float | None = None) -> NodeStatus:
        """Wait until `count` devices of `resource` are allocatable (write pods only after that)."""
        __tracebackhide__ = True
        limit = self.timeout if timeout is None else timeout
        deadline = asyncio.get_running_loop().time() + limit
        while True:
            status = await self.status()
            if status.allocatable.get(resource) == count:
                return status
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(
                    f"{resource} allocatable is {status.allocatable.get(resource, 'absent')}, "
                    f"not {count}, after {limit:g} s (capacity {status.capacity.get(resource, 'absent')})"
                )
            await asyncio.sleep(POLL_S)

    async def pods(self) -> list[PodStatus]:
        return [_pod_status(entry) for entry in (await self._get(contract.PODS))["pods"]]

    async def apply(self, pod_yaml: str, timeout: float | None = None) -> PodStatus:
        """Write one pod's manifest and wait for the daemon's decision: Running (admitted) or Failed."""
        __tracebackhide__ = True
        limit = self.timeout if timeout is None else timeout
        namespace, name = _identity(pod_yaml)
        file_name = f"{namespace}_{name}.yaml"
        # Replaced whole: the daemon's manifest watch never sees half a file (its temporary file is hidden).
        await asyncio.to_thread(replace_file, self.paths.manifests / file_name, pod_yaml, mode=0o644)
        deadline = asyncio.get_running_loop().time() + limit
        last: PodStatus | None = None
        while True:
            answer = await self._get(contract.PODS)
            for bad in answer["manifestErrors"]:
                if bad["file"] == file_name:
                    raise AssertionError(f"the node refused {file_name}: {bad['error']}")
            for entry in answer["pods"]:
                if entry["namespace"] == namespace and entry["name"] == name:
                    last = _pod_status(entry)
            if last is not None and last.phase in _SETTLED:
                return last
            if asyncio.get_running_loop().time() > deadline:
                seen = "not seen" if last is None else f"still {last.phase} {last.reason}".rstrip()
                raise AssertionError(f"pod {namespace}/{name}: {seen} after {limit:g} s")
            await asyncio.sleep(POLL_S)

    # -- inside ---------------------------------------------------------------------------------------

    async def _answers(self) -> bool:
        try:
            await StatusClient(self.paths.status_socket, wait=1.0).get(contract.HEALTHZ)
        except StatusClientError:
            return False
        return True

    async def _get(self, path: str) -> Any:
        __tracebackhide__ = True
        try:
            return await StatusClient(self.paths.status_socket, wait=self.timeout).get_json(path)
        except StatusClientError as err:
            raise AssertionError(f"node status {path}: {err}; {self._last_log_line()}") from None

    def _last_log_line(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no daemon log"
        return f"daemon log ends with: {lines[-1]}" if lines else "the daemon logged nothing"


def _identity(pod_yaml: str) -> tuple[str, str]:
    try:
        manifests = parse_manifest("pod.yaml", pod_yaml.encode())
    except ManifestError as err:
        raise AssertionError(f"apply(): the pod manifest is not valid: {err}") from None
    if len(manifests) != 1:
        raise AssertionError(f"apply() takes one pod per call; the manifest holds {len(manifests)}")
    pod = manifests[0].pod
    return pod.namespace, pod.name


def _pod_status(entry: dict[str, Any]) -> PodStatus:
    devices: dict[str, dict[str, tuple[str, ...]]] = {}
    run_options: dict[str, Allocation] = {}
    for container in entry.get("containers", ()):
        name = container["name"]
        held = {resource: tuple(ids) for resource, ids in container.get("devices", {}).items()}
        if held:
            devices[name] = held
        options = container.get("runOptions")
        if options is not None and any(options.values()):
            run_options[name] = _run_options(options)
    return PodStatus(
        namespace=entry.get("namespace", ""),
        name=entry.get("name", ""),
        phase=entry.get("phase", ""),
        reason=entry.get("reason") or "",
        message=entry.get("message") or "",
        devices=devices,
        run_options=run_options,
    )


def _run_options(view: dict[str, Any]) -> Allocation:
    with contextlib.suppress(KeyError):
        return Allocation(
            envs=dict(view["envs"]),
            mounts=tuple(Mount(m["containerPath"], m["hostPath"], m["readOnly"]) for m in view["mounts"]),
            devices=tuple(
                DeviceSpec(d["containerPath"], d["hostPath"], d["permissions"]) for d in view["devices"]
            ),
            annotations=dict(view["annotations"]),
            cdi_devices=tuple(view["cdiDevices"]),
        )
    raise AssertionError(f"the node's run options are missing a field: {sorted(view)}")
