"""Snapshots, pod devices and run options merging."""

from __future__ import annotations

import logging

import pytest

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.checkpoint import PodDevicesEntry
from kubedevice.manager import DeviceInfo, MountInfo
from kubedevice.manager.devices import ResourceDevices
from kubedevice.manager.pod_devices import PodDevices
from kubedevice.manager.run_options import merge_run_options


def dev(did: str, health: str = "Healthy", *nodes: int) -> dp.Device:
    return dp.Device(
        ID=did, health=health, topology=dp.TopologyInfo(nodes=[dp.NUMANode(ID=n) for n in nodes])
    )


def test_snapshot_replaces_everything() -> None:
    devices = ResourceDevices()
    report = devices.apply_snapshot(
        [dev("a", "Healthy", 0), dev("b", "Unhealthy"), dev("c", "Healthy", 0, 1)]
    )
    assert report.warning("r") is None
    assert devices.healthy == {"a", "c"} and devices.unhealthy == {"b"} and devices.capacity == 3
    assert devices.topology == {"a": (0,), "c": (0, 1)} and devices.has_topology
    devices.apply_snapshot([dev("z")])
    assert devices.healthy == {"z"} and devices.unhealthy == set() and not devices.has_topology


def test_only_the_exact_healthy_string_is_healthy() -> None:
    devices = ResourceDevices()
    report = devices.apply_snapshot(
        [dev("a", "healthy"), dev("b", ""), dev("c", "HEALTHY"), dev("d", "Unhealthy")]
    )
    assert devices.healthy == set() and devices.unhealthy == {"a", "b", "c", "d"}
    assert report.unknown_health == {"a": "healthy", "b": "", "c": "HEALTHY"}
    warning = report.warning("example.com/r")
    assert warning is not None and "example.com/r" in warning and "'a'='healthy'" in warning


def test_duplicates_keep_the_last_occurrence_and_count_once() -> None:
    devices = ResourceDevices()
    report = devices.apply_snapshot([dev("a"), dev("a", "Unhealthy", 1), dev("b"), dev("b")])
    assert devices.healthy == {"b"} and devices.unhealthy == {"a"} and devices.capacity == 2
    assert devices.topology == {"a": (1,)}
    assert report.duplicate_ids == ["a", "b"]
    warning = report.warning("r")
    assert warning is not None and "duplicate device IDs" in warning


def test_mark_unhealthy_keeps_capacity_and_reported_health() -> None:
    devices = ResourceDevices()
    devices.apply_snapshot([dev("a"), dev("b", "Unhealthy")])
    devices.mark_unhealthy()
    assert devices.healthy == set() and devices.unhealthy == {"a", "b"} and devices.capacity == 2
    assert devices.device_health("a") == "Healthy" and devices.device_health("b") == "Unhealthy"
    assert devices.device_health("zz") is None


def test_pod_devices_checkpoint_round_trip() -> None:
    resp = dp.ContainerAllocateResponse(envs={"X": "1"}, cdi_devices=[dp.CDIDevice(name="v.com/c=1")])
    pods = PodDevices()
    pods.insert("p1", "c1", "r.com/a", {0: ["d0"], 1: ["d1"], -1: ["d2"]}, resp)
    pods.insert("p1", "c2", "r.com/b", {-1: ["x"]}, dp.ContainerAllocateResponse())
    pods.insert("p2", "c1", "r.com/a", {1: ["d3", "d1x"]}, resp)
    entries = pods.to_checkpoint()
    assert len(entries) == 3
    restored = PodDevices.from_checkpoint(entries)
    assert restored.to_checkpoint() == entries
    assert restored.devices() == {"r.com/a": {"d0", "d1", "d2", "d3", "d1x"}, "r.com/b": {"x"}}
    assert restored.container_devices("p1", "c1", "r.com/a") == {"d0", "d1", "d2"}
    assert restored.container_devices("p1", "c1", "r.com/zz") is None
    assert restored.holders_of("r.com/a", {"d3"}) == {"p2"}
    assert restored.device_topology("p1", "c1") == {"r.com/a": {"d0": (0,), "d1": (1,), "d2": ()}}
    assert restored.device_topology("nope", "c1") is None
    restored.delete(["p1"])
    assert restored.pod_uids() == {"p2"}


def test_pod_devices_skip_entries_that_do_not_decode(caplog: pytest.LogCaptureFixture) -> None:
    good = dp.ContainerAllocateResponse(envs={"A": "b"}).SerializeToString()
    entries = [
        PodDevicesEntry("p1", "c", "r.com/a", {0: ["d0"]}, b"\x0a\xff"),
        PodDevicesEntry("p2", "c", "r.com/a", {0: ["d1"]}, good),
        PodDevicesEntry("p3", "c", "r.com/a", None, None),
    ]
    with caplog.at_level(logging.ERROR):
        pods = PodDevices.from_checkpoint(entries)
    assert pods.pod_uids() == {"p2", "p3"}
    assert "p1" in caplog.text
    assert pods.device_topology("p3", "c") == {}


def test_a_device_under_several_numa_nodes_accumulates_them() -> None:
    pods = PodDevices()
    pods.insert("p", "c", "r.com/a", {0: ["d"], 1: ["d"]}, dp.ContainerAllocateResponse())
    assert pods.device_topology("p", "c") == {"r.com/a": {"d": (0, 1)}}
    assert pods.container_devices("p", "c", "r.com/a") == {"d"}


def test_merge_run_options_first_wins_and_is_deterministic(caplog: pytest.LogCaptureFixture) -> None:
    a = dp.ContainerAllocateResponse(
        envs={"B": "a", "A": "a"},
        mounts=[dp.Mount(container_path="/m", host_path="/ha", read_only=True)],
        devices=[dp.DeviceSpec(container_path="/dev/x", host_path="/dev/ha", permissions="rw")],
        annotations={"k": "a"},
        cdi_devices=[dp.CDIDevice(name="v.com/c=1"), dp.CDIDevice(name="v.com/c=1")],
    )
    b = dp.ContainerAllocateResponse(
        envs={"A": "b", "C": "b"},
        mounts=[
            dp.Mount(container_path="/m", host_path="/hb"),
            dp.Mount(container_path="/n", host_path="/hn"),
        ],
        devices=[dp.DeviceSpec(container_path="/dev/x", host_path="/dev/hb", permissions="r")],
        annotations={"k": "b", "j": "b"},
        cdi_devices=[dp.CDIDevice(name="v.com/c=1"), dp.CDIDevice(name="v.com/c=2")],
    )
    with caplog.at_level(logging.WARNING):
        opts = merge_run_options([("r.com/a", a), ("r.com/b", b)])
    assert opts.envs == [("A", "a"), ("B", "a"), ("C", "b")]
    assert opts.mounts == [MountInfo("/m", "/ha", True), MountInfo("/n", "/hn", False)]
    assert opts.devices == [DeviceInfo("/dev/ha", "/dev/x", "rw")]
    assert opts.annotations == [("k", "a"), ("j", "b")]
    assert opts.cdi_devices == ["v.com/c=1", "v.com/c=2"]
    assert "conflicting" in caplog.text
    empty = merge_run_options([])
    assert (empty.envs, empty.mounts, empty.devices, empty.annotations, empty.cdi_devices) == (
        [],
        [],
        [],
        [],
        [],
    )
