"""Drivers written with the SDK's DRA features of 1.37, as real processes beside one real daemon: the
README's examples (a MIG-style driver, a shared-GPU driver) and the fake driver's shapes (partitions,
shared devices, taints, health taints, binding conditions) — pods run on partitions and shares, a tainted
device is avoided, a health taint comes and goes and is not stale after a restart, binding conditions
turn True. Each test has drivers of its own (their own driver names), so one daemon serves the module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.e2e.test_readme_commands import Shell, readme_block
from tests.node_dra_helpers import NODE, DRANodeProcesses, dra_node_processes, pod_yaml
from tests.node_helpers import wait_for

BLOCK_MARKER = "examples/dra_mig_driver.py"


@pytest.fixture(scope="module")
def node() -> Iterator[DRANodeProcesses]:
    for procs in dra_node_processes():
        procs.start_daemon()
        yield procs


def phases(node: DRANodeProcesses, prefix: str) -> dict[str, str]:
    return {p["name"]: p["phase"] for p in node.pods() if p["name"].startswith(prefix)}


def claim_of(node: DRANodeProcesses, pod: str) -> dict[str, Any]:
    """The claim `node claims --json` shows for the pod's template claim (`<pod>-gpu-...`) or its own."""
    claims = (node.try_status("/claims") or {"claims": []})["claims"]
    [claim] = [c for c in claims if c["name"] == pod or c["name"].startswith(f"{pod}-gpu")]
    return dict(claim)


def slice_devices(node: DRANodeProcesses, driver: str) -> dict[str, list[str]]:
    """Each published device of `driver` and its taints (`key=value:Effect`), from the slice file."""
    path = node.paths.resourceslices / f"{driver}.yaml"
    if not path.exists():
        return {}
    out = {}
    for doc in yaml.safe_load_all(path.read_text()):
        for device in (doc or {}).get("spec", {}).get("devices", []):
            out[device["name"]] = [
                f"{t['key']}={t.get('value', '')}:{t['effect']}" for t in device.get("taints", [])
            ]
    return out


def taint_time(node: DRANodeProcesses, driver: str, device: str) -> str | None:
    """The timeAdded of the device's health taint in the slice file, None while it has none."""
    path = node.paths.resourceslices / f"{driver}.yaml"
    for doc in yaml.safe_load_all(path.read_text()) if path.exists() else ():
        for entry in (doc or {}).get("spec", {}).get("devices", []):
            for taint in entry.get("taints", []) if entry["name"] == device else ():
                if taint["key"] == "kubedevice.io/unhealthy":
                    return str(taint["timeAdded"])
    return None


def gpu_class(driver: str) -> str:
    return f"""apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: {driver}}}
spec:
  selectors:
  - cel: {{expression: "device.driver == '{driver}'"}}
"""


def claim_and_pod(name: str, driver: str, cel: str = "true", capacity: str = "") -> str:
    """A claim `name` of one device of `driver` (matching `cel`, taking `capacity`) and a pod using it."""
    extra = f", capacity: {{requests: {{{capacity}}}}}" if capacity else ""
    request = f'{{deviceClassName: {driver}, selectors: [{{cel: {{expression: "{cel}"}}}}]{extra}}}'
    claim = f"""apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: {name}}}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {request}
"""
    return f"{claim}---\n{pod_yaml(name, name)}"


def test_the_readmes_mig_and_shared_gpu_examples_run_beside_the_daemon(node: DRANodeProcesses) -> None:
    lines = readme_block(BLOCK_MARKER)
    # The module's daemon is the block's first line; the rest runs as written, in the daemon's folder.
    assert lines[0] == "kubedevice node --root-dir /tmp/kd --node-name node-1 &"
    shell = Shell(node.root)
    try:
        for line in lines[1:4]:
            result = shell.line(line)
            assert result is None or result.returncode == 0, result.stderr
        wait_for(
            lambda: (
                phases(node, "mig-")
                == {"mig-slice-0": "Running", "mig-slice-1": "Running", "mig-whole": "Running"}
            ),
            "the MIG pods to run",
        )
        devices = {
            pod: claim_of(node, pod)["allocation"]["devices"]["results"][0]["device"]
            for pod in phases(node, "mig-")
        }
        whole = devices.pop("mig-whole")
        assert whole in ("gpu-0", "gpu-1") and all(not d.startswith(f"{whole}-") for d in devices.values())
        assert all("-mig-" in d for d in devices.values())

        def shared() -> dict[str, str] | None:
            got = phases(node, "shared-gpu-")
            return got if sorted(got.values()) == ["Pending", "Running", "Running"] else None

        waiting = next(n for n, p in wait_for(shared, "two shares to run").items() if p == "Pending")
        assert "cannot allocate all claims" in node.wait_message(waiting, "cannot allocate")["message"]
        running = [n for n in phases(node, "shared-gpu-") if n != waiting]
        shares = [claim_of(node, n) for n in running]
        results = [c["allocation"]["devices"]["results"][0] for c in shares]
        assert [r["consumedCapacity"] for r in results] == [{"memory": "30Gi"}] * 2
        assert results[0]["device"] == results[1]["device"] == "gpu-0"
        assert results[0]["shareID"] != results[1]["shareID"]
        for claim, result in zip(shares, results, strict=True):
            [entry] = claim["statusDevices"]
            assert entry["shareID"] == result["shareID"] and entry["data"] == {"memoryLimit": "30Gi"}
            assert [(c["type"], c["status"], c["reason"]) for c in entry["conditions"]] == [
                ("Ready", "True", "Prepared")
            ]
        for line in lines[4:]:
            result = shell.line(line)
            assert result is not None and result.returncode == 0, result.stderr
    finally:
        shell.close()


def test_fake_partitions_run_until_the_counters_run_out(node: DRANodeProcesses) -> None:
    driver = "parts.example.com"
    node.start_dra_plugin(driver, 1, "--partitions", "2", "--poll-interval", "0.2")
    node.write_manifest("parts-class.yaml", gpu_class(driver))
    part = f"has(device.attributes['{driver}'].partition)"
    for name in ("parts-a", "parts-b"):
        node.write_manifest(f"{name}.yaml", claim_and_pod(name, driver, part))
    full = f"has(device.attributes['{driver}'].full)"
    node.write_manifest("parts-full.yaml", claim_and_pod("parts-full", driver, full))
    for name in ("parts-a", "parts-b"):
        node.wait_phase(name, "Running")
    pod = node.wait_message("parts-full", "shared counters")
    assert (
        pod["phase"] == "Pending"
        and f"{driver}/{NODE}/parts-0-full: the shared counters it consumes" in pod["message"]
    )
    (node.paths.manifests / "parts-a.yaml").unlink()
    (node.paths.manifests / "parts-b.yaml").unlink()
    node.wait_phase("parts-full", "Running")
    assert claim_of(node, "parts-full")["allocation"]["devices"]["results"][0]["device"] == "parts-0-full"


def test_fake_shares_of_one_device_are_prepared_apart(node: DRANodeProcesses) -> None:
    driver = "shares.example.com"
    node.start_dra_plugin(driver, 1, "--shared", "--poll-interval", "0.2")
    node.write_manifest("shares-class.yaml", gpu_class(driver))
    for name in ("shares-a", "shares-b"):
        # The example driver's policy: a claim naming no amount takes all of a capacity.
        node.write_manifest(f"{name}.yaml", claim_and_pod(name, driver, capacity="memory: 40Gi, compute: 50"))
    for name in ("shares-a", "shares-b"):
        node.wait_phase(name, "Running")
    claims = [claim_of(node, n) for n in ("shares-a", "shares-b")]
    share_ids = [c["allocation"]["devices"]["results"][0]["shareID"] for c in claims]
    assert len(set(share_ids)) == 2
    # The default prepare: the device's CDI ID, and a CDI device of the share's own, with its memory.
    for claim, share in zip(claims, share_ids, strict=True):
        assert claim["cdiDevices"] == [f"{driver}/shares=shares-0", f"{driver}/claim={claim['uid']}-{share}"]
        spec = json.loads((node.root / "cdi" / f"kubedevice-{driver}-{claim['uid']}.json").read_text())
        [device] = spec["devices"]
        assert device["containerEdits"]["env"] == [
            f"KUBEDEVICE_SHARE_SHARES_0={share}",
            "KUBEDEVICE_SHARE_SHARES_0_COMPUTE=50",
            "KUBEDEVICE_SHARE_SHARES_0_MEMORY=40Gi",
        ]


def test_fake_taints_health_taints_and_binding_conditions(node: DRANodeProcesses) -> None:
    driver = "attach.example.com"
    health = node.root / "attach-health.json"
    flags = (
        *("--taint", "example.com/broken=true:NoSchedule@attach-1", "--binding-delay", "0.5"),
        *("--health-file", str(health), "--health-taint", "kubedevice.io/unhealthy:NoExecute"),
        *("--poll-interval", "0.2"),
    )
    node.start_dra_plugin(driver, 2, *flags)
    node.write_manifest("attach-class.yaml", gpu_class(driver))
    node.write_manifest("attach-a.yaml", claim_and_pod("attach-a", driver))
    node.wait_phase("attach-a", "Running")
    assert claim_of(node, "attach-a")["allocation"]["devices"]["results"][0]["device"] == "attach-0"

    def bound() -> list[dict[str, Any]] | None:
        entries = claim_of(node, "attach-a")["statusDevices"]
        return entries if entries and entries[0]["conditions"] else None

    [entry] = wait_for(bound, "the fake to set the binding condition")
    assert [(c["type"], c["status"], c["reason"]) for c in entry["conditions"]] == [
        ("BindingConditions", "True", "Ready")
    ]
    # The only free device is tainted: the second pod waits, saying so.
    node.write_manifest("attach-b.yaml", claim_and_pod("attach-b", driver))
    pod = node.wait_message("attach-b", "has the taint")
    assert "attach-1 has the taint example.com/broken=true:NoSchedule" in pod["message"]

    # Unhealthy: published with the health taint; healthy again: the taint goes.
    health.write_text(
        json.dumps({"unhealthy": ["attach-0"], "taints": {"attach-1": ["example.com/x=y:None"]}})
    )
    wait_for(
        lambda: slice_devices(node, driver).get("attach-0") == ["kubedevice.io/unhealthy=:NoExecute"],
        "the health taint",
    )
    assert slice_devices(node, driver)["attach-1"] == [
        "example.com/broken=true:NoSchedule",
        "example.com/x=y:None",
    ]
    health.write_text("[]")
    wait_for(lambda: slice_devices(node, driver).get("attach-0") == [], "the health taint gone")

    # A restart while unhealthy keeps the taint's time; healthy after the restart: no stale taint.
    health.write_text('["attach-0"]')
    added = wait_for(lambda: taint_time(node, driver, "attach-0"), "the health taint again")
    node.stop_dra_plugin(driver)
    node.start_dra_plugin(driver, 2, *flags)
    assert wait_for(lambda: taint_time(node, driver, "attach-0"), "the taint after a restart") == added
    node.stop_dra_plugin(driver)
    health.write_text("[]")
    node.start_dra_plugin(driver, 2, *flags)
    wait_for(lambda: slice_devices(node, driver).get("attach-0") == [], "no stale taint after the restart")


def test_a_pod_waits_for_its_devices_binding_conditions(node: DRANodeProcesses) -> None:
    """The fake driver sets its device's binding condition True after a delay; the daemon starts the pod
    only then (docs/architecture.md, "DRA: binding conditions")."""
    driver = "late.example.com"
    node.start_dra_plugin(driver, 1, "--binding-delay", "3", "--poll-interval", "0.2")
    node.write_manifest("late-class.yaml", gpu_class(driver))
    node.write_manifest("late.yaml", claim_and_pod("late", driver))

    def decided() -> tuple[str, bool] | None:
        pod, claim = node.pod("late"), node.claim("late")
        if pod is None or claim is None:
            return None
        ready = any(c["status"] == "True" for e in claim["statusDevices"] for c in e["conditions"] or [])
        return (pod["phase"], ready) if pod["phase"] == "Running" or ready else None

    phase, ready = wait_for(decided, "the pod to run or its binding condition to be set")
    assert ready, f"the pod went {phase} before its device's binding condition was True"
    node.wait_phase("late", "Running")
