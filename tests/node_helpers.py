"""Helpers for the node daemon's tests: real processes, short socket paths, waiting with deadlines."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from kubedevice.node.config import NodePaths
from kubedevice.statusapi.client import StatusClient, StatusClientError
from tests.waiting import poll, poll_async, short_tempdir

CLI = (sys.executable, "-c", "from kubedevice.cli import run; run()")
DEADLINE_S = 20.0
T = TypeVar("T")


def short_tmpdir(prefix: str = "kd-node-") -> Path:
    return short_tempdir(prefix)


def wait_for(condition: Callable[[], T | None], what: str, deadline_s: float = DEADLINE_S) -> T:
    return poll(condition, what, deadline_s, interval=0.05)


async def async_wait_for(condition: Callable[[], Any], what: str, deadline_s: float = DEADLINE_S) -> Any:
    return await poll_async(condition, what, deadline_s, interval=0.05)


def run_cli(*args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, check=False)


class NodeProcesses:
    """A daemon and its plugins as subprocesses under one root; `close()` kills them all."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths = NodePaths.under(root)
        self.daemon: subprocess.Popen[bytes] | None = None
        self.plugins: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: list[Any] = []

    def _spawn(self, name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 - closed in close()
        self._logs.append(log)
        return subprocess.Popen(
            [*CLI, *args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env={**os.environ, **env} if env else None,
        )

    def start_daemon(self, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        self.daemon = self._spawn("daemon", "node", "--root-dir", str(self.root), *extra, env=env)
        wait_for(
            lambda: self.try_status("/healthz") is not None or self._daemon_exited(), "the daemon to answer"
        )
        assert self.daemon.poll() is None, (
            f"the daemon exited with {self.daemon.returncode}: {self.log('daemon')}"
        )
        return self.daemon

    def _daemon_exited(self) -> bool:
        return self.daemon is not None and self.daemon.poll() is not None

    def start_plugin(self, resource: str, devices: int, *extra: str) -> subprocess.Popen[bytes]:
        name = "plugin-" + resource.replace("/", "_")
        proc = self._spawn(
            name,
            "plugin",
            "fake",
            "--resource",
            resource,
            "--devices",
            str(devices),
            "--plugin-dir",
            str(self.paths.plugin_dir),
            "--poll-interval",
            "0.1",
            *extra,
        )
        self.plugins[resource] = proc
        return proc

    def kill_daemon(self, sig: int = signal.SIGKILL) -> int:
        assert self.daemon is not None
        self.daemon.send_signal(sig)
        return self.daemon.wait(timeout=DEADLINE_S)

    def kill_plugin(self, resource: str) -> None:
        proc = self.plugins.pop(resource)
        proc.kill()
        proc.wait(timeout=DEADLINE_S)

    def try_status(self, path: str) -> Any:
        try:
            body = asyncio.run(StatusClient(self.paths.status_socket, wait=2.0).get(path))
        except StatusClientError:
            return None
        return body if path in ("/healthz", "/metrics") else json.loads(body)

    def node(self) -> dict[str, Any]:
        data = self.try_status("/node")
        assert data is not None, f"the daemon does not answer: {self.log('daemon')}"
        return dict(data)

    def pods(self) -> list[dict[str, Any]]:
        data = self.try_status("/pods")
        assert data is not None, f"the daemon does not answer: {self.log('daemon')}"
        return list(data["pods"])

    def manifest_errors(self) -> dict[str, str]:
        data = self.try_status("/pods")
        assert data is not None, f"the daemon does not answer: {self.log('daemon')}"
        return {e["file"]: e["error"] for e in data["manifestErrors"]}

    def pod(self, name: str) -> dict[str, Any] | None:
        for entry in self.pods():
            if entry.get("name") == name:
                return entry
        return None

    def wait_capacity(
        self, resource: str, capacity: int | None, allocatable: int | None = None
    ) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            node = self.try_status("/node")
            if node is None or node["capacity"].get(resource) != capacity:
                return None
            if allocatable is not None and node["allocatable"].get(resource) != allocatable:
                return None
            return dict(node)

        return wait_for(check, f"{resource} capacity {capacity} allocatable {allocatable}")

    def wait_phase(self, name: str, phase: str) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            pods = (self.try_status("/pods") or {"pods": []})["pods"]
            return next((p for p in pods if p.get("name") == name and p.get("phase") == phase), None)

        return wait_for(check, f"pod {name} to be {phase}")

    def write_manifest(self, file: str, text: str) -> Path:
        path = self.paths.manifests / file
        self.paths.manifests.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name("." + path.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)  # atomic: the daemon never reads half a file
        return path

    def log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def close(self) -> None:
        for proc in [*self.plugins.values(), self.daemon]:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=DEADLINE_S)
        for log in self._logs:
            log.close()
        shutil.rmtree(self.root, ignore_errors=True)


def node_processes() -> Iterator[NodeProcesses]:
    procs = NodeProcesses(short_tmpdir())
    try:
        yield procs
    finally:
        procs.close()


def pod_manifest(
    name: str, limits: dict[str, Any], *, namespace: str = "default", extra_meta: str = ""
) -> str:
    limit_lines = "".join(f"\n        {r}: {v}" for r, v in limits.items()) or " {}"
    return f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {namespace}{extra_meta}
spec:
  containers:
  - name: main
    resources:
      limits:{limit_lines}
"""


#: A pod with every kind of container that can hold devices: a plain init container (`setup`, which the
#: kubelet's PodResources does not list), a sidecar (`sidecar`), and app containers with and without devices.
TRAINER_POD = """apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: ml}
spec:
  initContainers:
  - name: setup
    resources: {limits: {example.com/gpu: 1}}
  - name: sidecar
    restartPolicy: Always
    resources: {limits: {example.com/gpu: 1}}
  containers:
  - name: train
    resources: {limits: {example.com/gpu: 2}}
  - name: idle
"""

#: A one-container pod holding a GPU and a NIC (a device without topology).
WEB_POD = """apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers:
  - name: main
    resources: {limits: {example.com/gpu: 1, example.com/nic: 1}}
"""


#: The billion laughs in YAML: 9 levels of 9 aliases in 430 bytes, 490 million nodes once expanded.
ALIAS_BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{x}: &{x} [{', '.join([f'*{p}'] * 9)}]\n" for p, x in zip("abcdefgh", "bcdefghi", strict=True)
)


def slice_yaml(name: str, driver: str, *devices: str, node: str = "node-1") -> str:
    """A ResourceSlice alone in its pool (named after the slice)."""
    listed = "".join(f"  - {{name: {d}}}\n" for d in devices)
    return (
        f"apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: {name}}}\n"
        f"spec:\n  driver: {driver}\n  nodeName: {node}\n"
        f"  pool: {{name: {name}, generation: 1, resourceSliceCount: 1}}\n  devices:\n{listed}"
    )
