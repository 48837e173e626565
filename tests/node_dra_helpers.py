"""The node daemon with DRA for tests: real daemon and `kubedevice plugin fake --api dra` processes.

The DRA plugin's stdout (one line per event: `prepare`, `prepare-cached`, `unprepare`, ...) goes to a file
the test reads; claims and pods are manifest documents written into the daemon's folder.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubedevice.checkpoint import decode_dra
from tests.dra_plugin import DRATestPlugin
from tests.node_helpers import CLI, DEADLINE_S, NodeProcesses, short_tmpdir, wait_for
from tests.plugin_process import fields

DRIVER = "gpu.example.com"
NODE = "node-1"
#: The class `claim_yaml`'s request names: every device of the test driver.
GPU_CLASS = """apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
"""


class DRANodeProcesses(NodeProcesses):
    """A daemon (node name node-1) and its DRA plugins, each plugin's events in `<root>/dra-<driver>.out`."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.dra_plugins: dict[str, subprocess.Popen[bytes]] = {}

    def start_daemon(self, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        return super().start_daemon("--node-name", NODE, *extra, env=env)

    def start_dra_plugin(
        self, driver: str = DRIVER, devices: int = 2, *extra: str
    ) -> subprocess.Popen[bytes]:
        """The fake DRA driver, registered and its devices published (waited for); `extra`: more flags
        (`--attribute`, `--capacity`, `--numa-nodes`)."""
        out = open(self.root / f"dra-{driver}.out", "ab")  # noqa: SIM115 - closed in close()
        err = open(self.root / f"dra-{driver}.log", "ab")  # noqa: SIM115 - closed in close()
        self._logs.extend([out, err])
        proc = subprocess.Popen(
            [
                *CLI,
                *("plugin", "fake", "--driver", driver, "--api", "dra", "--devices", str(devices)),
                *("--kubelet-dir", str(self.root), "--cdi-spec-dir", str(self.root / "cdi")),
                *extra,
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
        )
        self.dra_plugins[driver] = proc
        wait_for(
            lambda: self.driver_devices(driver) and any(e["connected"] for e in self.endpoints(driver)),
            f"{driver} to register and publish its devices",
        )
        return proc

    def stop_dra_plugin(self, driver: str = DRIVER) -> None:
        """SIGTERM: the plugin removes its sockets, so the daemon deregisters it."""
        proc = self.dra_plugins.pop(driver)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=DEADLINE_S)
        wait_for(lambda: not self.endpoints(driver), f"{driver} to be deregistered")

    def endpoints(self, driver: str = DRIVER) -> list[dict[str, Any]]:
        """The driver's registered endpoints, as /node shows them."""
        return list(self.node()["draDrivers"].get(driver, {}).get("endpoints", []))

    def driver_devices(self, driver: str = DRIVER) -> list[str] | None:
        node = self.try_status("/node")
        if node is None:
            return None
        entry = node.get("draDrivers", {}).get(driver)
        return list(entry["devices"]) if entry and entry["devices"] else None

    def events(self, kind: str, driver: str = DRIVER) -> list[dict[str, str]]:
        """The plugin's event lines of one kind (`prepare`, `prepare-cached`, `unprepare`), as fields."""
        path = self.root / f"dra-{driver}.out"
        lines = path.read_text().splitlines() if path.exists() else []
        return [fields(line) for line in lines if line.split(" ", 1)[0] == kind]

    def checkpoint_claims(self) -> dict[str, tuple[set[str], list[str]]]:
        """namespace/name -> (pod UIDs, `driver/pool/device` of its devices) from dra_manager_state."""
        data = decode_dra((self.root / "dra_manager_state").read_bytes())
        found: dict[str, tuple[set[str], list[str]]] = {}
        for c in data.claims or ():
            devices = [
                f"{driver}/{d.pool_name}/{d.device_name}"
                for driver, devs in sorted((c.driver_state or {}).items())
                for d in devs or ()
            ]
            found[f"{c.namespace}/{c.claim_name}"] = (set(c.pod_uids or ()), devices)
        return found

    def claim(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        for entry in (self.try_status("/claims") or {"claims": []})["claims"]:
            if (entry["namespace"], entry["name"]) == (namespace, name):
                return dict(entry)
        return None

    def wait_message(self, name: str, text: str) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            pod = self.pod(name)
            return pod if pod is not None and text in pod["message"] else None

        return wait_for(check, f"pod {name}'s message to say {text!r}")

    def wait_gone(self, name: str) -> None:
        wait_for(lambda: self.pod(name) is None, f"pod {name} to be gone")

    def write_slices(self, file: str, text: str) -> Path:
        """A ResourceSlice file in `resourceslices/`, replaced whole (as a driver publishes)."""
        path = self.paths.resourceslices / file
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{file}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
        return path

    def publish(self, file: str, text: str, devices: int, driver: str = DRIVER) -> None:
        """Once the driver is registered, its slices written as `file` and read (`devices` devices): what a
        driver publishes again after a restart of the daemon wiped the folder."""
        wait_for(lambda: self.endpoints(driver), f"{driver} to register")
        self.write_slices(file, text)
        wait_for(lambda: len(self.driver_devices(driver) or ()) == devices, "the slices to be read")

    def close(self) -> None:
        for proc in self.dra_plugins.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=DEADLINE_S)
        super().close()


class PluginThread:
    """The raw DRA plugin served on an event loop of its own thread, for a test written synchronously."""

    def __init__(self, node: DRANodeProcesses) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.plugin = DRATestPlugin(node.root / "plugins_registry", node.root, driver=DRIVER)
        self._run(self.plugin.start())

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)

    def stop(self) -> None:
        self._run(self.plugin.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)


def raw_driver_node(file: str, slices: str, devices: int) -> Iterator[tuple[DRANodeProcesses, PluginThread]]:
    """A daemon with the raw DRA plugin registered, `slices` (of `devices` devices) published as `file`
    and the class `gpu` written (GPU_CLASS)."""
    for procs in dra_node_processes():
        procs.start_daemon()
        plugin = PluginThread(procs)
        try:
            procs.publish(file, slices, devices)
            procs.write_manifest("class.yaml", GPU_CLASS)
            yield procs, plugin
        finally:
            plugin.stop()


def dra_node_processes() -> Iterator[DRANodeProcesses]:
    procs = DRANodeProcesses(short_tmpdir("kd-dra-"))
    try:
        yield procs
    finally:
        procs.close()


def claim_yaml(
    name: str,
    device: str | None = "gpu-0",
    *,
    driver: str = DRIVER,
    reserved_for: list[tuple[str, str]] | None = None,
    uid: str | None = None,
) -> str:
    """A claim with one request `gpu`; `device` None leaves it without allocation; `reserved_for` lists
    (pod name, pod UID) as a user-written status.reservedFor."""
    meta = f"{{name: {name}" + (f", uid: {uid}" if uid else "") + "}"
    text = f"""apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {meta}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {{deviceClassName: gpu}}
"""
    status = []
    if device is not None:
        status.append(
            "  allocation:\n    devices:\n      results:\n"
            f"      - {{request: gpu, driver: {driver}, pool: {NODE}, device: {device}}}\n"
        )
    if reserved_for is not None:
        status.append(
            "  reservedFor:\n"
            + "".join(f"  - {{resource: pods, name: {n}, uid: {u}}}\n" for n, u in reserved_for)
        )
    return text + ("status:\n" + "".join(status) if status else "")


def one_slice(name: str, devices: str) -> str:
    """The test driver's only slice of its pool on node-1, `devices` the YAML lines of `spec.devices`."""
    return f"""apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: {name}}}
spec:
  driver: {DRIVER}
  nodeName: {NODE}
  pool: {{name: {NODE}, generation: 1, resourceSliceCount: 1}}
  devices:
{devices}"""


def attribute_is(attribute: str, value: str) -> str:
    """A CEL selector: the device's attribute (of the test driver) has this string value."""
    return f"device.attributes['{DRIVER}'].{attribute} == '{value}'"


def claim_and_pod(name: str, selector: str | None = None, tolerations: str = "") -> str:
    """A claim of one device of class `gpu` and a pod whose container uses it, both called `name`:
    `selector` a CEL expression the device must meet, `tolerations` the request's (YAML flow style)."""
    extra = f", selectors: [{{cel: {{expression: {json.dumps(selector)}}}}}]" if selector else ""
    extra += f", tolerations: {tolerations}" if tolerations else ""
    claim = f"""apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: {name}}}
spec:
  devices:
    requests:
    - {{name: gpu, exactly: {{deviceClassName: gpu{extra}}}}}
"""
    return claim + "---\n" + pod_yaml(name, name)


def pod_yaml(name: str, *claims: str, uid: str | None = None, limits: dict[str, int] | None = None) -> str:
    """A pod whose container `main` uses each named claim through a pod claim of the same name."""
    meta = f"{{name: {name}" + (f", uid: {uid}" if uid else "") + "}"
    resource_claims = "".join(f"  - {{name: {c}, resourceClaimName: {c}}}\n" for c in claims)
    container_claims = "".join(f"      - {{name: {c}}}\n" for c in claims)
    limit_lines = "".join(f"        {r}: {n}\n" for r, n in (limits or {}).items())
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata: {meta}\nspec:\n"
        + (f"  resourceClaims:\n{resource_claims}" if claims else "")
        + "  containers:\n  - name: main\n    resources:\n"
        + (f"      claims:\n{container_claims}" if claims else "")
        + (f"      limits:\n{limit_lines}" if limits else "")
    )
