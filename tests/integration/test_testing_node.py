"""The pytest kit's `node` fixture and run_conformance(): the real daemon and checker, real processes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kubedevice.plugin import Allocation, Device, DevicePlugin
from kubedevice.plugin.builtin.fake import FakeConfig, FakePlugin
from kubedevice.testing import Node, run_conformance
from tests.node_helpers import pod_manifest

CLI = (sys.executable, "-c", "from kubedevice.cli import run; run()")
FAKE = (*CLI, "plugin", "fake", "--resource", "example.com/fake", "--devices", "2", "--poll-interval", "0.1")
PLUGINS = Path(__file__).resolve().parents[1] / "conformance_plugins"

POD = pod_manifest("trainer", {"example.com/fake": 2}, namespace="ml")


async def test_the_node_admits_a_pod_and_keeps_it_over_a_restart(node: Node) -> None:
    await node.start_plugin(*FAKE, "--plugin-dir", "{plugin_dir}")
    status = await node.wait_allocatable("example.com/fake", 2)
    assert status.healthy == {"example.com/fake": ("fake-0", "fake-1")}

    pod = await node.apply(POD)

    assert (pod.namespace, pod.name, pod.phase) == ("ml", "trainer", "Running")
    assert pod.devices == {"main": {"example.com/fake": ("fake-0", "fake-1")}}
    assert pod.run_options == {"main": Allocation(envs={"FAKE_DEVICES": "fake-0,fake-1"})}
    status = await node.status()
    assert (status.allocatable, status.free) == ({"example.com/fake": 2}, {"example.com/fake": 0})

    await node.restart()
    assert (await node.wait_allocatable("example.com/fake", 2)).free == {"example.com/fake": 0}
    assert [(p.name, p.phase) for p in await node.pods()] == [("trainer", "Running")]


async def test_a_pod_asking_too_much_fails_with_the_kubelets_reason(node: Node) -> None:
    await node.serve_plugin(FakePlugin(FakeConfig("example.com/fake", 1, poll_interval=0.1)))
    await node.wait_allocatable("example.com/fake", 1)

    pod = await node.apply(POD)

    assert (pod.phase, pod.devices, pod.run_options) == ("Failed", {}, {})
    assert pod.reason == "UnexpectedAdmissionError"
    assert "example.com/fake" in pod.message


@pytest.mark.kubedevice_node("--numa-nodes", "2")
async def test_the_node_marker_passes_options_to_the_daemon(node: Node) -> None:
    assert (await node.status()).raw["topology"]["numaNodes"] == [0, 1]


async def test_a_bad_manifest_and_a_missing_resource_fail_in_one_line(node: Node) -> None:
    with pytest.raises(AssertionError) as bad:
        await node.apply("apiVersion: v1\nkind: Pod\nmetadata: {}\n")
    assert str(bad.value).startswith("apply(): the pod manifest is not valid: ")
    assert "\n" not in str(bad.value)

    with pytest.raises(AssertionError) as absent:
        await node.wait_allocatable("example.com/none", 1, timeout=0.2)
    assert str(absent.value) == (
        "example.com/none allocatable is absent, not 1, after 0.2 s (capacity absent)"
    )


async def test_conformance_passes_for_the_fake_plugin_command_and_object() -> None:
    command = await run_conformance([*FAKE, "--plugin-dir", "{plugin_dir}"], restarts=1, absence=0.5)
    command.assert_passed()
    assert command.passed

    in_process = await run_conformance(
        FakePlugin(FakeConfig("example.com/fake", 2, poll_interval=0.1)), restarts=1, absence=0.5
    )
    in_process.assert_passed()
    assert in_process.result("kubelet-restart").value == "PASS"


class BusDown(DevicePlugin):
    """Lists a healthy device but cannot allocate it: every Allocate fails."""

    resource_name = "example.com/bus-down"

    async def devices(self) -> list[Device]:
        return [Device("d0")]

    async def allocate(self, devices: object) -> Allocation:
        raise RuntimeError("widget bus down")


async def test_assert_passed_fails_with_one_line_per_failed_check() -> None:
    report = await run_conformance(BusDown(), restarts=1, absence=0.5)

    with pytest.raises(AssertionError) as failed:
        report.assert_passed()
    assert str(failed.value).splitlines() == [
        f"plugin conformance: 1 of {len(report.checks)} checks failed",
        "FAIL allocate: Allocate failed: INTERNAL: allocate failed: RuntimeError: widget bus down "
        "(Allocate of 1 device); unknown ID refused (INVALID_ARGUMENT)",
    ]


async def test_a_plugin_that_never_registers_shows_the_cause_and_its_log() -> None:
    report = await run_conformance([sys.executable, str(PLUGINS / "wrong_version.py")], restarts=1)

    with pytest.raises(AssertionError) as failed:
        report.assert_passed()
    lines = str(failed.value).splitlines()
    assert lines[0] == f"plugin conformance: 1 of {len(report.checks)} checks failed"
    assert lines[1].startswith('FAIL registration: version "v1alpha" refused: send "v1beta1" (requested API')
    assert lines[2].startswith("plugin log ends with: ")
    assert len(lines) == 3


async def test_run_conformance_refuses_a_missing_command_in_one_line() -> None:
    with pytest.raises(AssertionError) as missing:
        await run_conformance("no-such-plugin-binary --plugin-dir {plugin_dir}")
    assert str(missing.value) == "run_conformance: command not found: no-such-plugin-binary"


async def test_conformance_looks_for_an_in_process_plugins_cdi_spec_in_its_own_folder(tmp_path: Path) -> None:
    spec_dir = tmp_path / "cdi"
    spec_dir.mkdir()
    config = FakeConfig("example.com/fake", 2, poll_interval=0.1, cdi=True, cdi_spec_dir=str(spec_dir))

    own = await run_conformance(FakePlugin(config), restarts=0, absence=0.5)
    own.assert_passed()
    assert own.result("allocate").value == "PASS"

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    named = await run_conformance(FakePlugin(config), restarts=0, absence=0.5, cdi_spec_dirs=[elsewhere])
    allocate = next(row for row in named.checks if row.name == "allocate")
    assert allocate.result.value == "WARN"
    assert "defined by no spec in" in allocate.detail and str(elsewhere) in allocate.detail
