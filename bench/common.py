"""What every scenario shares: figures with their targets, timing, short folders, and a test plugin.

A figure is the median of several runs, shown with its min and max, the target it must meet and the
real kubelet's value measured on a machine of this kind, so the table reads as a comparison.
"""

from __future__ import annotations

import asyncio
import enum
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import grpc
import grpc.aio
from prometheus_client import CollectorRegistry

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from kubedevice.manager import DeviceManager
from kubedevice.topology import TopologyConfig, TopologyManager, new_manager, synthetic_topology

RESOURCE = "bench.kubedevice.io/widget"
#: How the CLI is run as a process (the console script may not be on PATH).
CLI = (sys.executable, "-c", "from kubedevice.cli import run; run()")


class Scale(enum.Enum):
    """How big a run is. QUICK: tiny sizes, one run, to check the harness (the suite's smoke tests); it
    measures nothing useful. SHORT: `python -m bench` and `make bench`, every scenario once at the sizes
    of the figures the docs quote, in a minute or two (README.md says which sizes). FULL: `--full` and
    `make bench-full`, every scale target (10,000 pods, 1,000,000 devices...), three runs per figure."""

    QUICK = "quick"
    SHORT = "short"
    FULL = "full"

    @property
    def runs(self) -> int:
        """Runs per figure unless --runs says otherwise."""
        return 3 if self is Scale.FULL else 1


@dataclass(frozen=True, slots=True)
class Target:
    """A bound a figure must stay under (or above, for rates)."""

    value: float
    better: Literal["lower", "higher"] = "lower"

    def met(self, measured: float) -> bool:
        return measured < self.value if self.better == "lower" else measured >= self.value

    def describe(self, unit: str) -> str:
        sign = "<" if self.better == "lower" else ">="
        return f"{sign} {_fmt(self.value)} {unit}"


@dataclass(slots=True)
class Figure:
    """One measured quantity of a scenario over its runs."""

    scenario: str
    name: str
    unit: str
    samples: list[float] = field(default_factory=list)
    target: Target | None = None
    #: The real kubelet's value on this kind of machine, as text (it may be a note, not a number).
    kubelet: str | None = None
    note: str | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def met(self) -> bool | None:
        if self.target is None or not self.samples:
            return None
        return self.target.met(self.median)

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "name": self.name,
            "unit": self.unit,
            "samples": self.samples,
            "median": self.median if self.samples else None,
            "min": min(self.samples) if self.samples else None,
            "max": max(self.samples) if self.samples else None,
            "target": self.target.describe(self.unit) if self.target else None,
            "met": self.met,
            "kubelet": self.kubelet,
            "note": self.note,
        }


class Figures:
    """The figures of one scenario, created on first use and filled run after run."""

    def __init__(self, scenario: str) -> None:
        self.scenario = scenario
        self._by_name: dict[str, Figure] = {}

    def add(
        self,
        name: str,
        value: float,
        unit: str,
        *,
        target: Target | None = None,
        kubelet: str | None = None,
        note: str | None = None,
    ) -> None:
        figure = self._by_name.get(name)
        if figure is None:
            figure = self._by_name[name] = Figure(self.scenario, name, unit, target=target, kubelet=kubelet)
        if note is not None:
            figure.note = note
        figure.samples.append(value)

    def __iter__(self) -> Iterator[Figure]:
        return iter(self._by_name.values())


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def fmt(value: float) -> str:
    return _fmt(value)


@contextmanager
def short_tempdir(prefix: str = "kdb-") -> Iterator[Path]:
    """A folder on disk (fsync is real there) with paths short enough for unix sockets; removed after."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def wait_until(predicate: Callable[[], bool], what: str, within: float = 120.0) -> None:
    """Poll tightly (1 ms) with a deadline; for conditions that have no notification."""
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {within:g} s waiting for {what}")
        await asyncio.sleep(0.001)


async def wait_for_allocatable(
    manager: DeviceManager, resource: str, count: int, within: float = 120.0
) -> None:
    """Wake on the manager's change notifications until `resource` has exactly `count` allocatable."""
    deadline = time.monotonic() + within
    while True:
        version = manager.version
        if manager.get_capacity()[1].get(resource) == count:
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"timed out after {within:g} s waiting for {count} allocatable {resource}")
        try:
            async with asyncio.timeout(remaining):
                await manager.wait_for_change(version)
        except TimeoutError:
            continue


# ------------------------------------------------------------------------------------------------------
# Devices on the wire


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field_bytes(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def device_id(index: int) -> str:
    return f"widget-{index:07d}"


def list_and_watch_bytes(count: int, unhealthy: Iterable[int] = (), numa_count: int = 2) -> bytes:
    """A serialized ListAndWatchResponse of `count` devices in `numa_count` equal blocks, one per NUMA node
    (the first half on NUMA 0, the rest on NUMA 1 by default).

    Encoded by hand: building 10^6 Device messages in Python takes longer than the manager needs to apply
    them, and a benchmark that spends its time in its own fixture measures nothing. The smoke test checks
    that protobuf parses it back to the same devices.
    """
    sick = set(unhealthy)
    healthy = _field_bytes(2, b"Healthy")
    unhealthy_field = _field_bytes(2, b"Unhealthy")
    # NUMANode{ID: n}: field 1 as a varint, left out for 0 (the protobuf default).
    numa = [_field_bytes(3, _field_bytes(1, b"\x08" + _varint(n) if n else b"")) for n in range(numa_count)]
    per_node = -(-count // numa_count)
    parts: list[bytes] = []
    append = parts.append
    for i in range(count):
        body = (
            _field_bytes(1, device_id(i).encode())
            + (unhealthy_field if i in sick else healthy)
            + numa[i // per_node]
        )
        append(_field_bytes(1, body))
    return b"".join(parts)


AllocateHandler = Callable[[dp.AllocateRequest], Awaitable[dp.AllocateResponse]]


async def allocate_env_and_devices(request: dp.AllocateRequest) -> dp.AllocateResponse:
    """What a typical plugin answers: an env var, a device node and a CDI name per device."""
    resp = dp.AllocateResponse()
    for creq in request.container_requests:
        c = resp.container_responses.add()
        c.envs["WIDGETS"] = ",".join(creq.devices_ids)
        for did in creq.devices_ids:
            c.devices.add(container_path=f"/dev/{did}", host_path=f"/dev/{did}", permissions="rw")
            c.cdi_devices.add(name=f"{RESOURCE}={did}")
    return resp


class BenchPlugin:
    """A grpc.aio device plugin whose ListAndWatch sends pre-serialized snapshots.

    Snapshots go out as bytes (the method has no response serializer) so the plugin's side of a
    10^6-device message costs only the transport, not Python building protobuf objects; everything the
    clock measures is then the manager's work.
    """

    def __init__(
        self, socket_path: Path, snapshot: bytes, allocate: AllocateHandler = allocate_env_and_devices
    ):
        self.socket_path = socket_path
        self._snapshot = snapshot
        self._allocate = allocate
        self._queues: list[asyncio.Queue[bytes | None]] = []
        self._server: grpc.aio.Server | None = None
        #: perf_counter() just before the last snapshot was handed to gRPC.
        self.sent_at = 0.0

    async def start(self) -> None:
        handlers = {
            "GetDevicePluginOptions": grpc.unary_unary_rpc_method_handler(
                self._options,
                request_deserializer=dp.Empty.FromString,
                response_serializer=dp.DevicePluginOptions.SerializeToString,
            ),
            "ListAndWatch": grpc.unary_stream_rpc_method_handler(
                self._list_and_watch, request_deserializer=dp.Empty.FromString, response_serializer=None
            ),
            "Allocate": grpc.unary_unary_rpc_method_handler(
                self._allocate_rpc,
                request_deserializer=dp.AllocateRequest.FromString,
                response_serializer=dp.AllocateResponse.SerializeToString,
            ),
        }
        server = grpc.aio.server(options=[("grpc.max_send_message_length", -1)])
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("v1beta1.DevicePlugin", handlers),)
        )
        server.add_insecure_port("unix://" + str(self.socket_path))
        await server.start()
        self._server = server

    async def stop(self) -> None:
        for q in self._queues:
            q.put_nowait(None)
        if self._server is not None:
            await self._server.stop(None)
            self._server = None

    async def register(self, kubelet_socket: Path) -> None:
        async with grpc.aio.insecure_channel("unix://" + str(kubelet_socket)) as channel:
            await dp_grpc.RegistrationStub(channel).Register(
                dp.RegisterRequest(
                    version="v1beta1",
                    endpoint=self.socket_path.name,
                    resource_name=RESOURCE,
                    options=dp.DevicePluginOptions(),
                ),
                timeout=30,
            )

    def send(self, snapshot: bytes) -> None:
        """Send a new snapshot on every open stream."""
        self._snapshot = snapshot
        self.sent_at = time.perf_counter()
        for q in self._queues:
            q.put_nowait(snapshot)

    async def _options(self, request: dp.Empty, context: Any) -> dp.DevicePluginOptions:
        return dp.DevicePluginOptions()

    async def _list_and_watch(self, request: dp.Empty, context: Any) -> AsyncIterator[bytes]:
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._queues.append(queue)
        try:
            self.sent_at = time.perf_counter()
            yield self._snapshot
            while (snapshot := await queue.get()) is not None:
                yield snapshot
        finally:
            self._queues.remove(queue)

    async def _allocate_rpc(self, request: dp.AllocateRequest, context: Any) -> dp.AllocateResponse:
        return await self._allocate(request)


@asynccontextmanager
async def admitting_node(
    root: Path, devices: int, *, policy: str = "none", numa_count: int = 2, **manager_options: Any
) -> AsyncIterator[tuple[TopologyManager, DeviceManager]]:
    """A topology manager (`policy`, container scope, `numa_count` nodes) over `manager_with_plugin`,
    wired as the node daemon wires them: the device manager is its hint provider and reads its store."""
    tm = new_manager(synthetic_topology(numa_count), TopologyConfig(policy), CollectorRegistry())
    async with manager_with_plugin(
        root, devices, numa_count, affinity=tm, numa_nodes=range(numa_count), **manager_options
    ) as (manager, _plugin):
        tm.add_hint_provider(manager)
        yield tm, manager


@asynccontextmanager
async def manager_with_plugin(
    root: Path, devices: int, numa_count: int = 2, **manager_options: Any
) -> AsyncIterator[tuple[DeviceManager, BenchPlugin]]:
    """A started DeviceManager under `root` with a BenchPlugin of `devices` devices registered and applied."""
    manager = DeviceManager(root / "dp", **manager_options)
    await manager.start()
    plugin = BenchPlugin(root / "dp" / "bench.sock", list_and_watch_bytes(devices, numa_count=numa_count))
    await plugin.start()
    try:
        await plugin.register(manager.socket_path)
        await wait_for_allocatable(manager, RESOURCE, devices)
        yield manager, plugin
    finally:
        await manager.stop()
        await plugin.stop()
