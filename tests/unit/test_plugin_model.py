"""The SDK's plain data, names, wire conversion and option derivation."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.plugin import (
    Allocation,
    Backoff,
    Device,
    DevicePlugin,
    DeviceSpec,
    EventKind,
    Mount,
    PluginOptions,
)
from kubedevice.plugin.events import EventBus
from kubedevice.plugin.naming import check_socket_path, resource_name_problem, socket_stem
from kubedevice.plugin.wire import allocation_to_wire, device_from_wire, device_to_wire, options_to_wire


def test_device_defaults_and_wire_round_trip() -> None:
    plain = Device("d-0")
    assert (plain.healthy, plain.numa_nodes) == (True, ())
    message = device_to_wire(Device("d-1", healthy=False, numa_nodes=[0, 1]))  # type: ignore[arg-type]
    assert (message.ID, message.health, [n.ID for n in message.topology.nodes]) == (
        "d-1",
        "Unhealthy",
        [0, 1],
    )
    assert not device_to_wire(plain).HasField("topology")
    assert device_from_wire(message) == Device("d-1", False, (0, 1))
    # Only the exact string counts as healthy.
    assert device_from_wire(dp.Device(ID="x", health="healthy")).healthy is False


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Device(""), "non-empty"),
        (lambda: Device("a b"), "whitespace or commas"),
        (lambda: Device("a,b"), "whitespace or commas"),
        (lambda: Device("a", numa_nodes=(-1,)), "non-negative int"),
        (lambda: Mount("rel", "/h"), "mount container_path must be an absolute path"),
        (lambda: DeviceSpec("/c", "/h", "rwx"), "combination of r, w, m"),
        (lambda: DeviceSpec("/c", "/h", ""), "combination of r, w, m"),
        (lambda: Allocation(envs={"": "x"}), "env and annotation"),
        (lambda: Allocation(cdi_devices=["gpu0"]), "not fully qualified — write it as vendor/class=name"),
    ],
)
def test_bad_plain_data_is_refused_with_a_reason(make: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()  # type: ignore[operator]


def test_allocation_to_wire_carries_every_field() -> None:
    wire = allocation_to_wire(
        Allocation(
            envs={"A": "1"},
            mounts=[Mount("/c", "/h", read_only=True)],
            devices=[DeviceSpec("/dev/x", "/dev/y", "rwm")],
            annotations={"k": "v"},
            cdi_devices=["example.com/gpu=0"],
        )
    )
    assert dict(wire.envs) == {"A": "1"} and dict(wire.annotations) == {"k": "v"}
    assert (wire.mounts[0].container_path, wire.mounts[0].host_path, wire.mounts[0].read_only) == (
        "/c",
        "/h",
        True,
    )
    assert (wire.devices[0].host_path, wire.devices[0].permissions) == ("/dev/y", "rwm")
    assert [c.name for c in wire.cdi_devices] == ["example.com/gpu=0"]
    assert options_to_wire(PluginOptions(True, False)) == dp.DevicePluginOptions(pre_start_required=True)


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("nvidia.com/gpu", True),
        ("example.com/Widget_1.a", True),
        ("gpu", False),
        ("example.com/a/b", False),
        ("kubernetes.io/foo", False),
        ("Example.com/gpu", False),
        ("requests.example.com/gpu", False),
        ("example.com/", False),
        ("example.com/" + "a" * 64, False),
    ],
)
def test_resource_names_follow_the_kubelets_rule(name: str, ok: bool) -> None:
    assert (resource_name_problem(name) is None) is ok


def test_socket_names_are_safe_and_bounded() -> None:
    assert socket_stem("example.com/gpu") == "example.com_gpu"
    assert check_socket_path("/tmp/x.sock") == "/tmp/x.sock"
    with pytest.raises(ValueError, match="107-byte"):
        check_socket_path("/" + "x" * 107)


class _Base(DevicePlugin):
    resource_name = "example.com/x"

    async def devices(self) -> Sequence[Device]:
        return []


class _Preferring(_Base):
    async def preferred_allocation(
        self, available: Sequence[Device], must_include: Sequence[Device], size: int
    ) -> Sequence[str]:
        return []


class _PreStarting(_Base):
    async def pre_start_container(self, devices: Sequence[Device]) -> None:
        return None


class _Watching(DevicePlugin):
    async def watch_devices(self):  # type: ignore[no-untyped-def]
        yield []


def test_options_and_source_follow_the_overridden_hooks() -> None:
    assert _Base().options() == PluginOptions(False, False)
    assert _Preferring().options() == PluginOptions(False, True)
    assert _PreStarting().options() == PluginOptions(True, False)
    assert (_Base().describe_source(), _Watching().describe_source()) == ("poll", "watch")
    with pytest.raises(NotImplementedError, match="must override devices\\(\\) or watch_devices\\(\\)"):
        DevicePlugin().describe_source()


def test_backoff_doubles_up_to_the_cap() -> None:
    delays = Backoff(initial=0.1, cap=1.0).delays()
    assert [round(next(delays), 3) for _ in range(7)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]


def test_event_lines_are_stable_and_a_failing_handler_is_contained() -> None:
    bus = EventBus("example.com/x")
    seen: list[str] = []

    def broken(_: object) -> None:
        raise RuntimeError("boom")

    bus.subscribe(broken)
    unsubscribe = bus.subscribe(lambda e: seen.append(e.line()))
    bus.emit(EventKind.REGISTER_FAILED, code="UNAVAILABLE", detail="transport is closing")
    unsubscribe()
    bus.emit(EventKind.STOPPED)
    assert seen == ["register-failed resource=example.com/x code=UNAVAILABLE detail=transport_is_closing"]
