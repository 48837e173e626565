"""`kubedevice demo`'s DRA stories: a fake DRA driver, claims shared by pods and a claim per container,
a kubelet restart that keeps them prepared, and the last pod of a claim taking its preparation along.

The driver is the SDK's fake (`kubedevice plugin fake --api dra`); its event lines (`prepare`,
`prepare-cached`, `unprepare`) go to a file of their own, which the stories read to show what the
driver was asked, beside the claims table of the status API.
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

from kubedevice.node.demo.script import Demo, DemoError
from kubedevice.statusapi import contract

DRIVER = "gpu.example.com"

_CLASS = f"""apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu
spec:
  selectors:
  - cel:
      expression: device.driver == "{DRIVER}"
"""
#: `shared` is allocated by the daemon (no status.allocation: it takes a free device of class gpu);
#: `one` and `two` are allocated in the manifest, as a scheduler would have written them.
_CLAIMS = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: {name}
  namespace: demo
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu
"""


def _allocated(pool: str, device: str) -> str:
    """A claim's status.allocation of one device of the driver, as a scheduler writes it."""
    result = f"{{request: gpu, driver: {DRIVER}, pool: {pool}, device: {device}}}"
    return f"status:\n  allocation:\n    devices:\n      results:\n      - {result}\n"


_SHARING_POD = """apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: demo
spec:
  resourceClaims:
  - name: gpu
    resourceClaimName: shared
  containers:
  - name: main
    resources:
      claims:
      - name: gpu
"""
_DUO = """apiVersion: v1
kind: Pod
metadata:
  name: duo
  namespace: demo
spec:
  resourceClaims:
  - {name: first, resourceClaimName: one}
  - {name: second, resourceClaimName: two}
  containers:
  - name: a
    resources:
      claims:
      - name: first
  - name: b
    resources:
      claims:
      - name: second
"""


class _Driver:
    """The fake DRA driver's process and its event lines."""

    def __init__(self, demo: Demo) -> None:
        self.demo = demo
        self.events = demo.root / "dra-driver.out"
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        root = self.demo.root
        out = await self.demo.log_file(self.events.name)
        err = await self.demo.log_file("dra-driver.log")
        args = ["plugin", "fake", "--driver", DRIVER, "--api", "dra", "--devices", "4"]
        args += ["--kubelet-dir", str(root), "--cdi-spec-dir", str(root / "cdi")]
        self.process = await self.demo.spawn(*args, stdout=out, stderr=err)
        self.demo.plugins[DRIVER] = self.process

    def lines(self, *kinds: str) -> list[str]:
        """The driver's event lines of these kinds, as `prepare demo/shared`."""
        text = self.events.read_text() if self.events.exists() else ""
        out = []
        for line in text.splitlines():
            kind, _, rest = line.partition(" ")
            if kind in kinds:
                claim = next((f[6:] for f in rest.split() if f.startswith("claim=")), "?")
                out.append(f"{kind} {claim}")
        return out

    def say_calls(self, since: int = 0) -> None:
        for line in self.lines("prepare", "prepare-cached", "unprepare")[since:]:
            self.demo.console.print(f"    driver: {line}", highlight=False, soft_wrap=True)


async def _claims(demo: Demo) -> list[dict[str, Any]]:
    return list((await demo.status(contract.CLAIMS))["claims"])


async def _claim_is(demo: Demo, name: str, check: Any) -> bool:
    for claim in await _claims(demo):
        if claim["namespace"] == "demo" and claim["name"] == name:
            return bool(check(claim))
    return False


def _with_cdi_devices(pod: dict[str, Any]) -> bool:
    return all(c["cdiDevices"] for c in pod["containers"])


async def _holds(value: bool) -> bool:
    """A condition already computed, as the awaitable `until` wants."""
    return value


def _write(path: Path, text: str) -> None:
    path.write_text(text)


async def play_dra(demo: Demo) -> None:
    """Stories 4 to 6, on the daemon the earlier stories left running."""
    demo.say(
        f"Story 4: DRA. A fake DRA driver {DRIVER} registers through plugins_registry/ and publishes 4 GPUs "
        "in resourceslices/; a DeviceClass, three ResourceClaims and three pods are dropped in: left and "
        "right share claim shared (allocated by the daemon), duo has a claim per container (allocated "
        "in the manifest)"
    )
    driver = _Driver(demo)
    await driver.start()
    await demo.until(
        f"{DRIVER} registered and its 4 devices are in /node",
        lambda: demo.node_has(lambda d: len(d.get("draDrivers", {}).get(DRIVER, {}).get("devices", [])) == 4),
    )
    node_name = (await demo.status(contract.NODE))[contract.NODE_NAME_FIELD]
    manifests = demo.paths.manifests
    claims = [
        _CLASS,
        _CLAIMS.format(name="shared"),
        _CLAIMS.format(name="one") + _allocated(node_name, "gpu-2"),
        _CLAIMS.format(name="two") + _allocated(node_name, "gpu-3"),
    ]
    await asyncio.to_thread(_write, manifests / "claims.yaml", "---\n".join(claims))
    for name in ("left", "right"):
        await asyncio.to_thread(_write, manifests / f"{name}.yaml", _SHARING_POD.format(name=name))
    await asyncio.to_thread(_write, manifests / "duo.yaml", _DUO)
    for name in ("left", "right", "duo"):
        await demo.until(f"{name} is Running", functools.partial(demo.pod_is, name, "Running"))
    await demo.until(
        "the driver prepared each claim once: shared for left and right together",
        lambda: _holds(len(driver.lines("prepare")) == 3),
    )
    driver.say_calls()
    await demo.show(claims=True)

    demo.say("Story 5: the kubelet restarts with claims prepared. SIGKILL the daemon, start it again")
    before = len(driver.lines("prepare", "prepare-cached", "unprepare"))
    await demo.restart_daemon("best-effort")
    for name in ("left", "right", "duo"):
        await demo.until(
            f"{name} is Running again with its claims' CDI devices",
            functools.partial(demo.pod_is, name, "Running", _with_cdi_devices),
        )
    await demo.until(
        f"{DRIVER} registered again",
        lambda: demo.node_has(lambda d: len(d.get("draDrivers", {}).get(DRIVER, {}).get("devices", [])) == 4),
    )
    calls = driver.lines("prepare", "prepare-cached", "unprepare")[before:]
    if calls:
        raise DemoError(f"the driver was called again across the restart: {', '.join(calls)}")
    demo.console.print(
        "    ok: no prepare call after the restart: the claims came back from dra_manager_state",
        soft_wrap=True,
    )

    demo.say(
        "Story 6: pods leave. left's manifest is removed, then right's: the last pod of shared unprepares it"
    )
    await asyncio.to_thread((manifests / "left.yaml").unlink)
    await demo.until(
        "left is gone", lambda: demo.pods_have(lambda pods: all(p["name"] != "left" for p in pods))
    )
    if driver.lines("unprepare"):
        raise DemoError("shared was unprepared while right still used it")
    demo.console.print("    ok: shared stays prepared for right (no unprepare call)", soft_wrap=True)
    await asyncio.to_thread((manifests / "right.yaml").unlink)
    await demo.until(
        "right is gone and the driver unprepared shared",
        lambda: _holds(driver.lines("unprepare") == ["unprepare demo/shared"]),
    )
    await demo.until(
        "shared is neither prepared nor reserved, and the daemon gave its device back",
        lambda: _claim_is(
            demo, "shared", lambda c: not c["cached"] and not c["reservedFor"] and not c["allocation"]
        ),
    )
    driver.say_calls(before)
    await demo.show(claims=True)
