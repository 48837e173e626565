"""The pytest kit's `dra_kubelet` fixture (loaded through the `kubedevice` pytest11 entry point): an SDK
driver served in this loop against the DRA manager, the claims it fetches from the daemon-style status API,
and the one-line failures of the kit."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from kubedevice.conformance import Result
from kubedevice.plugin import Device
from kubedevice.plugin.dra.model import Claim, PreparedDevice
from kubedevice.statusapi.client import StatusClient
from kubedevice.testing import PluginCallFailed, StandInDRAKubelet, run_conformance
from tests.dra_kubelet import DRIVER
from tests.integration.dra_plugins import Gpus, HookedGpus


async def test_a_claim_is_served_as_the_node_daemon_serves_it(dra_kubelet: StandInDRAKubelet) -> None:
    await dra_kubelet.serve_plugin(Gpus())
    await dra_kubelet.wait_registered(DRIVER)
    uid = dra_kubelet.add_claim("c1", {"gpu": ["gpu-0", "gpu-1"]})
    status, body = await StatusClient.under(dra_kubelet.kubelet_dir).get_answer("/claims/default/c1")
    assert status == 200 and f'"uid": "{uid}"' in body.decode()
    assert await dra_kubelet.prepare("c1") == [
        "gpu.example.com/gpu=gpu-0",
        "gpu.example.com/gpu=gpu-1",
        f"gpu.example.com/claim={uid}-gpu",
    ]
    (claim,) = dra_kubelet.checkpoint()["ClaimInfoStateList"]
    assert (claim["ClaimName"], claim["ClaimUID"]) == ("c1", uid)
    ((info, prepared),) = dra_kubelet.manager.claim_infos()
    assert prepared and info.claim_name == "c1"
    await dra_kubelet.unprepare("c1")
    assert dra_kubelet.manager.claim_infos() == []


async def test_a_failing_hook_is_the_kubelets_one_line(dra_kubelet: StandInDRAKubelet) -> None:
    await dra_kubelet.serve_plugin(HookedGpus(failing=["uid-default-c2"]))
    await dra_kubelet.wait_registered()
    dra_kubelet.add_claim("c1", {"gpu": "gpu-0"})
    dra_kubelet.add_claim("c2", {"gpu": "gpu-1"})
    with pytest.raises(PluginCallFailed) as failed:
        await dra_kubelet.prepare("c1", "c2")
    assert str(failed.value) == (
        "prepare dynamic resources: NodePrepareResources failed for ResourceClaim c2: GPU busy"
    )


async def test_health_and_slices_follow_the_driver(dra_kubelet: StandInDRAKubelet) -> None:
    plugin = Gpus()
    await dra_kubelet.serve_plugin(plugin)
    await dra_kubelet.wait_for(lambda: dra_kubelet.health() == {"gpu-0": "Healthy", "gpu-1": "Healthy"})
    assert [d["name"] for d in dra_kubelet.slices()] == ["gpu-0", "gpu-1"]
    assert dra_kubelet.slices()[0]["attributes"]["deviceID"] == {"string": "gpu-0"}
    plugin.set_devices([Device("gpu-0", healthy=False), Device("gpu-1")])
    await dra_kubelet.wait_for(lambda: dra_kubelet.health().get("gpu-0") == "Unhealthy")
    await dra_kubelet.wait_for(lambda: [d["name"] for d in dra_kubelet.slices()] == ["gpu-1"])


async def test_the_kits_mistakes_are_one_line(dra_kubelet: StandInDRAKubelet) -> None:
    with pytest.raises(AssertionError) as no_driver:
        dra_kubelet.health()
    assert str(no_driver.value) == "pass driver=: 0 DRA drivers are known (none)"
    with pytest.raises(AssertionError) as unknown:
        await dra_kubelet.prepare("nowhere")
    assert str(unknown.value) == "no claim default/nowhere: add it with add_claim() first"
    with pytest.raises(AssertionError) as waited:
        await dra_kubelet.wait_registered(DRIVER, timeout=0.2)
    assert str(waited.value) == "gpu.example.com registered not met within 0.2 s; no DRA driver registered"


class DRAOnly(Gpus):
    resource_name = ""  # a driver name alone: run_conformance serves its DRA face


class PreparesNothing(DRAOnly):
    async def prepare(self, claim: Claim) -> Sequence[PreparedDevice]:
        return []


async def test_run_conformance_checks_a_dra_driver_object(tmp_path: Path) -> None:
    plugin = DRAOnly()
    plugin.cdi_spec_dir = str(tmp_path)
    report = await run_conformance(plugin, timeout=8)
    report.assert_passed()
    assert [row.name for row in report.checks][:2] == ["dra-registration", "dra-slices"]
    assert report.result("dra-idempotent") is Result.PASS
    # The claim's own spec (its env) is written in cdi_spec_dir; Gpus defines no spec for its own names.
    cdi = next(row for row in report.checks if row.name == "dra-cdi")
    assert cdi.result is Result.WARN
    assert cdi.detail.startswith(
        "CDI device(s) [gpu.example.com/gpu=gpu-0] of the prepared claim are defined"
    )
    broken = PreparesNothing()
    broken.cdi_spec_dir = str(tmp_path)
    failed = await run_conformance(broken, timeout=8)
    assert [row.name for row in failed.failures] == ["dra-prepare"]
    assert "claim conformance-1: no device in the answer" in failed.failures[0].detail


class Reporting(Gpus):
    """Reports each prepared device Ready in its claim, as a driver writing KEP-4817 status does."""

    async def prepare(self, claim: Claim) -> Sequence[PreparedDevice]:
        for result in claim.results:
            await self.set_device_condition(claim.ref, result, "Ready", reason="Prepared")
        return [PreparedDevice(r, (f"gpu.example.com/gpu={r.device_id}",)) for r in claim.results]


async def test_a_drivers_device_status_reaches_the_claim(dra_kubelet: StandInDRAKubelet) -> None:
    await dra_kubelet.serve_plugin(Reporting())
    await dra_kubelet.wait_registered(DRIVER)
    dra_kubelet.add_claim("c1", {"gpu": "gpu-0"})
    await dra_kubelet.prepare("c1")
    [entry] = dra_kubelet.device_status("c1")
    assert (entry["driver"], entry["device"]) == (DRIVER, "gpu-0")
    assert [(c["type"], c["status"], c["reason"]) for c in entry["conditions"]] == [
        ("Ready", "True", "Prepared")
    ]
