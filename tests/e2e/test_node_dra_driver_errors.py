"""The daemon's DRA step against a driver that answers what the test says (tests/dra_plugin.py, on the wire)
and a real daemon process: a driver's per-claim error keeps the pod Pending with the kubelet's text, and
the entry the cache pass recorded is unprepared when the pod goes; a claim edited while a pod uses it is a
new claim, refused to new pods until the old one is unprepared."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubedevice.dra import DriverClaim
from kubedevice.node.config import NodePaths
from kubedevice.statusapi.client import StatusClient, StatusClientError
from tests.dra_plugin import PREPARE, UNPREPARE, Device, DRATestPlugin
from tests.node_dra_helpers import DRIVER, NODE, claim_yaml, pod_yaml
from tests.node_helpers import CLI
from tests.waiting import poll_async, short_tempdir

PREFIX = "Failed to prepare dynamic resources: prepare dynamic resources: "


class Daemon:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths = NodePaths.under(root)
        self.log = open(root / "daemon.log", "ab")  # noqa: SIM115 - closed by the fixture
        self.proc = subprocess.Popen(
            [*CLI, "node", "--root-dir", str(root), "--node-name", NODE],
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
        )

    async def status(self, path: str) -> Any:
        try:
            return await StatusClient(self.paths.status_socket, wait=2.0).get_json(path)
        except StatusClientError:
            return None

    async def pod(self, name: str) -> dict[str, Any] | None:
        pods = (await self.status("/pods") or {"pods": []})["pods"]
        return next((p for p in pods if p["name"] == name), None)

    async def wait_pod(self, name: str, what: str, check: Any) -> dict[str, Any]:
        async def found() -> dict[str, Any] | None:
            pod = await self.pod(name)
            return pod if pod is not None and check(pod) else None

        return dict(await poll_async(found, f"pod {name} {what}", 20.0, interval=0.05))

    def write(self, file: str, text: str) -> None:
        tmp = self.paths.manifests / f".{file}.tmp"
        tmp.write_text(text)
        tmp.replace(self.paths.manifests / file)


@pytest.fixture
async def setup() -> AsyncIterator[tuple[Daemon, DRATestPlugin]]:
    root = short_tempdir("kd-draerr-")
    daemon = Daemon(root)
    plugin = DRATestPlugin(root / "plugins_registry", root, driver=DRIVER)
    try:
        await poll_async(lambda: daemon.status("/node"), "the daemon to serve", 20.0, interval=0.05)
        await plugin.start()
        assert (await plugin.wait_for_status()).plugin_registered
        yield daemon, plugin
    finally:
        await plugin.stop()
        daemon.proc.kill()
        daemon.proc.wait()
        daemon.log.close()


def _gpu0(ref: DriverClaim) -> list[Device]:
    return [Device(NODE, "gpu-0", ("gpu",), (f"{DRIVER}/gpu=gpu-0",))]


async def test_a_drivers_per_claim_error_keeps_the_pod_pending_and_its_entry_is_unprepared(
    setup: tuple[Daemon, DRATestPlugin],
) -> None:
    daemon, plugin = setup
    plugin.set_error("u-busy", "GPU busy")
    daemon.write("claims.yaml", claim_yaml("busy", uid="u-busy"))
    daemon.write("e.yaml", pod_yaml("e", "busy"))
    pod = await daemon.wait_pod("e", "to wait", lambda p: "GPU busy" in p["message"])
    assert (pod["phase"], pod["reason"], pod["message"]) == (
        "Pending",
        "FailedPrepareDynamicResources",
        PREFIX + "NodePrepareResources failed for ResourceClaim busy: GPU busy",
    )
    # The cache pass recorded the pod before the driver answered: removing the pod unprepares the claim.
    claim = next(c for c in (await daemon.status("/claims"))["claims"] if c["name"] == "busy")
    assert (claim["cached"], claim["prepared"], [p["pod"] for p in claim["pods"]]) == (
        True,
        False,
        ["default/e"],
    )
    (daemon.paths.manifests / "e.yaml").unlink()
    await poll_async(lambda: _gone(daemon, "e"), "pod e to go", 20.0, interval=0.05)
    assert [[c.uid for c in call.claims] for call in plugin.calls_of(UNPREPARE)] == [["u-busy"]]


async def test_a_claim_edited_while_a_pod_uses_it_waits_for_the_old_one_to_go(
    setup: tuple[Daemon, DRATestPlugin],
) -> None:
    daemon, plugin = setup
    plugin.set_default_devices(_gpu0)
    daemon.write("claims.yaml", claim_yaml("c1"))
    daemon.write("p.yaml", pod_yaml("p", "c1"))
    running = await daemon.wait_pod("p", "to run", lambda p: p["phase"] == "Running")
    old_uid = running["resourceClaims"][0]["uid"]
    # A new spec is a new claim (a new default UID); the pod that holds the old one keeps it.
    daemon.write("claims.yaml", claim_yaml("c1").replace("deviceClassName: gpu", "deviceClassName: gpu-big"))
    await poll_async(lambda: _new_uid(daemon, old_uid), "the new claim", 20.0, interval=0.05)
    daemon.write("q.yaml", pod_yaml("q", "c1"))
    pod = await daemon.wait_pod("q", "to wait", lambda p: p["message"] != "")
    assert pod["message"] == PREFIX + (
        f"old ResourceClaim with same name c1 and different UID {old_uid} still exists "
        "(previous pod force-deleted?!)"
    )
    assert (await daemon.pod("p"))["containers"][0]["cdiDevices"] == [f"{DRIVER}/gpu=gpu-0"]
    # The old claim unprepared with its pod, the new one is prepared for the waiting pod.
    (daemon.paths.manifests / "p.yaml").unlink()
    await daemon.wait_pod("q", "to run", lambda p: p["phase"] == "Running")
    new_uid = await _claim_uid(daemon)
    assert [[c.uid for c in call.claims] for call in plugin.calls_of(UNPREPARE)] == [[old_uid]]
    assert [[c.uid for c in call.claims] for call in plugin.calls_of(PREPARE)] == [[old_uid], [new_uid]]


async def _claim_uid(daemon: Daemon) -> str | None:
    claim = await daemon.status("/claims/default/c1")
    return None if claim is None else str(claim["metadata"]["uid"])


async def _new_uid(daemon: Daemon, old: str) -> bool:
    return await _claim_uid(daemon) not in (None, old)


async def _gone(daemon: Daemon, name: str) -> bool:
    return await daemon.status("/pods") is not None and await daemon.pod(name) is None
