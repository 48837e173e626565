"""Crash consistency: SIGKILL the device manager and the node daemon at seeded random moments.

Two seeded harnesses, both with real processes and real SIGKILLs (see tests/reliability_helpers.py):
- the crash worker, a device manager and its plugin in one process, killed mid-allocation, between
  commands and inside checkpoint writes (the daemon's KUBEDEVICE_TEST_CHECKPOINT_FAULT hook);
- the node daemon itself with a `kubedevice plugin fake` process and a manifest folder, killed at
  random moments while pods are added and removed, and inside checkpoint writes.

After every kill the next process checks the invariants: every pod reported admitted (Running) that is
still active keeps exactly its devices; no device belongs to two pods; the checkpoint verifies; no
temporary checkpoint file is left behind. The daemon's pods include some that hold no device (zero
requests, and pods admitted before the plugin of their resource first registered): no pod ever reported
Running is failed by a restart (all lifetimes run in the same boot).
KUBEDEVICE_CRASH_SOAK=N multiplies the lifetimes (a soak).
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kubedevice.checkpoint import WRITE_STAGES, CheckpointStore
from kubedevice.node.config import NodePaths
from kubedevice.statusapi.client import StatusClient, StatusClientError
from tests.node_helpers import pod_manifest, short_tmpdir
from tests.reliability_helpers import (
    WORKER_DEVICES,
    ForkServer,
    WorkerClient,
    fault_env,
    temp_files,
    wait_until,
)

SOAK = int(os.environ.get("KUBEDEVICE_CRASH_SOAK", "1"))
WORKER_SEEDS = (11, 23, 37, 41)
WORKER_LIFETIMES = 40 * SOAK
DAEMON_SEEDS = (5,)
DAEMON_LIFETIMES = 40 * SOAK
GPU = "example.com/gpu"
GPU_DEVICES = 6
#: A resource whose plugin starts only at this lifetime: pods asking for it before run without devices.
LATE = "example.com/late"
LATE_PLUGIN_LIFE = 12


@pytest.fixture
def forks() -> Iterator[ForkServer]:
    server = ForkServer()
    try:
        yield server
    finally:
        server.close()


@dataclass
class Ledger:
    """What the test was told: the pods admitted (and still active), with their devices."""

    admitted: dict[str, list[str]] = field(default_factory=dict)
    #: Admissions whose answer the kill cut off: either outcome is fine, but it must be consistent.
    in_doubt: set[str] = field(default_factory=set)
    #: Every pod ever reported Running (devices or none) whose manifest is still there.
    ran: set[str] = field(default_factory=set)
    kill_points: int = 0
    checks: int = 0
    violations: list[str] = field(default_factory=list)

    def check_restored(self, life: int, restored: dict[str, list[str]]) -> None:
        """Invariants over what a new process restored from the checkpoint."""
        self.checks += 1
        for uid, devices in self.admitted.items():
            if restored.get(uid) != devices:
                self.violations.append(f"life {life}: pod {uid} had {devices}, restored {restored.get(uid)}")
        owners: dict[str, str] = {}
        for uid, devices in restored.items():
            for d in devices:
                if d in owners:
                    self.violations.append(f"life {life}: device {d} belongs to {owners[d]} and {uid}")
                owners[d] = uid
        for uid in self.in_doubt:
            if restored.get(uid):
                self.admitted[uid] = restored[uid]
        self.in_doubt.clear()


def _check_files(ledger: Ledger, life: int, plugin_dir: Path) -> None:
    # Writes are serialised, so one temp file may be the write in progress; more are a crash's leftovers.
    leftovers = temp_files(plugin_dir)
    if len(leftovers) > 1:
        ledger.violations.append(f"life {life}: temporary checkpoint files left behind: {leftovers}")
    store = CheckpointStore(plugin_dir)
    if store.path.exists():
        try:
            store.read()
        except Exception as err:  # any failure is a violation to report, not a crash of the harness
            ledger.violations.append(f"life {life}: the checkpoint does not verify: {err}")


def _verify_with_cli(forks: ForkServer, ledger: Ledger, root: Path, checkpoint: Path) -> None:
    if not checkpoint.exists():
        return
    code, output = forks.run(["checkpoint", "verify", str(checkpoint)], root / "verify.log")
    if code != 0:
        ledger.violations.append(f"kubedevice checkpoint verify exited {code}: {output.strip()}")


# ----------------------------------------------------------------------------------------------------
# The crash worker: manager-level kill points


def _fault_spec(rng: random.Random) -> str | None:
    if rng.random() < 0.5:
        return None
    return f"{rng.choice(WRITE_STAGES)}:{rng.choice((0.2, 0.4, 0.7))}:{rng.randrange(1 << 30)}"


def _worker_lifetime(forks: ForkServer, root: Path, rng: random.Random, ledger: Ledger, life: int) -> None:
    sock = root / "worker.sock"
    sock.unlink(missing_ok=True)
    pid = forks.spawn(["worker", str(root)], root / "worker.log", env=fault_env(_fault_spec(rng)))

    def up() -> WorkerClient | str | None:
        try:
            return WorkerClient(sock)
        except OSError:
            return "died" if forks.exited(pid) is not None else None

    client = wait_until(up, "the crash worker to serve or die")
    if not isinstance(client, WorkerClient):
        ledger.kill_points += 1  # killed by the fault hook inside a checkpoint write at start
        return
    try:
        state = client.call({"op": "state"})
        if state is None:
            return
        if state["checkpoint_error"]:
            ledger.violations.append(
                f"life {life}: the checkpoint could not be read: {state['checkpoint_error']}"
            )
        ledger.check_restored(life, state["pods"])
        _check_files(ledger, life, root / "dp")
        if client.call({"op": "ready", "active": sorted(ledger.admitted)}) is None:
            return
        for step in range(rng.randint(1, 6)):
            if ledger.admitted and rng.random() < 0.3:
                del ledger.admitted[rng.choice(sorted(ledger.admitted))]
                if client.call({"op": "ready", "active": sorted(ledger.admitted)}) is None:
                    break
                continue
            uid = f"pod-{life}-{step}"
            try:
                client.send({"op": "admit", "uid": uid, "count": rng.randint(1, 3)})
            except OSError:
                # The fault hook fired in a background checkpoint write (after a ListAndWatch snapshot)
                # and the worker is already gone: whether it read the request is unknown.
                ledger.in_doubt.add(uid)
                break
            if rng.random() < 0.2:
                ledger.in_doubt.add(uid)  # killed right away: the kill lands inside the allocation
                break
            answer = client.receive()
            if answer is None:
                ledger.in_doubt.add(uid)  # the fault hook fired in this admission's checkpoint write
                break
            if "devices" in answer:
                ledger.admitted[uid] = answer["devices"]
            else:
                assert answer["error"].startswith("requested number of devices unavailable"), answer
    finally:
        client.close()
        forks.kill(pid)
        ledger.kill_points += 1


@pytest.mark.parametrize("seed", WORKER_SEEDS)
def test_manager_survives_sigkill_anywhere(forks: ForkServer, seed: int) -> None:
    root = short_tmpdir("kd-crash-")
    rng = random.Random(seed)
    ledger = Ledger()
    for life in range(WORKER_LIFETIMES):
        _worker_lifetime(forks, root, rng, ledger, life)
    _verify_with_cli(forks, ledger, root, root / "dp" / "kubelet_internal_checkpoint")
    assert ledger.kill_points == WORKER_LIFETIMES
    assert ledger.checks > WORKER_LIFETIMES // 2  # most lifetimes got far enough to be checked
    assert ledger.violations == [], "\n".join(ledger.violations[:20])
    assert sum(len(d) for d in ledger.admitted.values()) <= WORKER_DEVICES


# ----------------------------------------------------------------------------------------------------
# The node daemon: kills while manifests come and go


def _status(paths: NodePaths, path: str) -> Any:
    try:
        return asyncio.run(StatusClient(paths.status_socket, wait=2.0).get_json(path))
    except StatusClientError:
        return None


def _running(answer: dict[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in answer["pods"]:
        if p.get("phase") == "Running":
            out[p["name"]] = sorted(d for c in p["containers"] for d in c["devices"].get(GPU, []))
    return out


def _daemon_lifetime(
    forks: ForkServer, paths: NodePaths, rng: random.Random, ledger: Ledger, life: int, names: list[str]
) -> None:
    paths.status_socket.unlink(missing_ok=True)
    pid = forks.spawn(
        ["node", "--root-dir", str(paths.root)], paths.root / "daemon.log", env=fault_env(_fault_spec(rng))
    )

    def up() -> str | None:
        if _status(paths, "/pods") is not None:
            return "serving"
        return "died" if forks.exited(pid) is not None else None

    try:
        if wait_until(up, "the daemon to serve or die") == "died":
            return
        pods = _status(paths, "/pods")
        if pods is None:
            return
        present = {p.stem for p in paths.manifests.glob("*.yaml")}
        # Only pods whose manifest is still there must keep their devices; the rest are garbage-collected.
        ledger.admitted = {n: d for n, d in ledger.admitted.items() if n in present}
        ledger.check_restored(life, {n: d for n, d in _running(pods).items()})
        ledger.ran &= present
        phases = {p["name"]: p for p in pods["pods"]}
        for name in sorted(ledger.ran):
            pod = phases.get(name, {})
            if pod.get("phase") != "Running":
                ledger.violations.append(
                    f"life {life}: pod {name} was Running before the restart and is now "
                    f"{pod.get('phase')}: {pod.get('message')}"
                )
        _check_files(ledger, life, paths.plugin_dir)
        state_temps = _state_temp_files(paths.root)
        if len(state_temps) > 1:  # one may be the write in progress
            ledger.violations.append(f"life {life}: temporary pod state files left behind: {state_temps}")
        for _ in range(rng.randint(1, 3)):
            if names and rng.random() < 0.35:
                gone = names.pop(rng.randrange(len(names)))
                (paths.manifests / f"{gone}.yaml").unlink()
                ledger.admitted.pop(gone, None)
            else:
                name = f"p{life}x{rng.randrange(1000)}"
                draw = rng.random()
                # Mostly GPU pods; some zero requests and some for the late plugin's resource.
                limits = (
                    {GPU: '"0"'} if draw < 0.2 else {LATE: 1} if draw < 0.35 else {GPU: rng.randint(1, 2)}
                )
                text = pod_manifest(name, limits, extra_meta=f"\n  uid: uid-{name}")
                tmp = paths.manifests / f".{name}.tmp"
                tmp.write_text(text)
                os.replace(tmp, paths.manifests / f"{name}.yaml")
                names.append(name)
        # A random kill moment: somewhere in the scan, the admission, its Allocate or its checkpoint write.
        deadline = rng.uniform(0.0, 0.5)
        end = asyncio.run(_record_running(paths, ledger, deadline))
        if end == "died":
            return
    finally:
        if forks.exited(pid) is None:
            forks.kill(pid)
        ledger.kill_points += 1


def _state_temp_files(root: Path) -> list[str]:
    return sorted(n for n in os.listdir(root) if n.startswith(".") and n.endswith(".tmp"))


async def _record_running(paths: NodePaths, ledger: Ledger, seconds: float) -> str:
    """Watch /pods for `seconds`; every pod reported Running is remembered with its devices."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        try:
            pods = await StatusClient(paths.status_socket, wait=1.0).get_json("/pods")
        except StatusClientError:
            return "died"
        for name, devices in _running(pods).items():
            ledger.ran.add(name)
            # A pod without GPU devices (a zero request, the late resource) has nothing in the ledger.
            if devices:
                ledger.admitted.setdefault(name, devices)
        await asyncio.sleep(0.02)
    return "alive"


@pytest.mark.parametrize("seed", DAEMON_SEEDS)
def test_node_daemon_survives_sigkill_while_pods_come_and_go(forks: ForkServer, seed: int) -> None:
    paths = NodePaths.under(short_tmpdir("kd-crashd-"))
    paths.manifests.mkdir(parents=True)
    rng = random.Random(seed)
    ledger = Ledger()
    names: list[str] = []
    plugin = forks.spawn(
        [
            "plugin",
            "fake",
            "--resource",
            GPU,
            "--devices",
            str(GPU_DEVICES),
            "--plugin-dir",
            str(paths.plugin_dir),
        ],
        paths.root / "plugin.log",
    )
    for life in range(DAEMON_LIFETIMES):
        if life == LATE_PLUGIN_LIFE:
            forks.spawn(
                [
                    "plugin",
                    "fake",
                    "--resource",
                    LATE,
                    "--devices",
                    "4",
                    "--plugin-dir",
                    str(paths.plugin_dir),
                ],
                paths.root / "late-plugin.log",
            )
        _daemon_lifetime(forks, paths, rng, ledger, life, names)
        if life % 10 == 9:
            _verify_with_cli(forks, ledger, paths.root, paths.checkpoint)
    assert forks.exited(plugin) is None, (paths.root / "plugin.log").read_text()[-2000:]
    assert ledger.kill_points == DAEMON_LIFETIMES
    assert ledger.violations == [], "\n".join(ledger.violations[:20])
    assert ledger.admitted, "no pod was ever reported Running: the harness tested nothing"
    assert ledger.ran - set(ledger.admitted), "no pod without devices ran through a restart"
