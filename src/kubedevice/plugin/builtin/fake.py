"""`FakePlugin`: devices that exist only on paper, for tests, demos and conformance runs.

Devices are `fake-0 .. fake-<N-1>`, or with a DRA driver named after its first label (gpu.example.com:
`gpu-0 .. gpu-<N-1>`), spread over K NUMA nodes round-robin or in blocks. Health can be
fixed at start (`unhealthy`) and flipped at runtime through a JSON file listing the unhealthy IDs (or an
object with those and each device's taints), which is how tests running the plugin as a separate process
make health and taints change. The DRA shapes of the example driver (partitions, shared devices, binding
conditions) are fake_dra.py's.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from kubedevice.plugin.base import DevicePlugin
from kubedevice.plugin.builtin.fake_dra import BindingMarker, DRAShape, device_taints, mark_bound, parse_taint
from kubedevice.plugin.cdi import (
    CDIDevice,
    CDIError,
    CDISpec,
    ContainerEdits,
    check_spec_dir,
    validate_kind,
)
from kubedevice.plugin.dra.device_model import CounterSet, DeviceTaint
from kubedevice.plugin.dra.paths import check_driver_name
from kubedevice.plugin.errors import ConfigError
from kubedevice.plugin.model import Allocation, Device, Face, PluginOptions
from kubedevice.plugin.naming import check_resource_name

log = logging.getLogger(__name__)

NumaLayout = Literal["round-robin", "block"]
FakeApi = Literal["device-plugin", "dra", "both"]
_INT = re.compile(r"[+-]?[0-9]+")
#: The attributes every fake device publishes on the DRA face, set by the plugin itself.
OWN_ATTRIBUTES = ("index", "uuid")


def parse_attribute(text: str) -> tuple[str, str | int | bool]:
    """``NAME=VALUE`` → (name, typed value): an integer, true/false, else a string (``version:1.2.3`` too)."""
    name, equals, value = text.partition("=")
    if not equals or not name:
        raise ConfigError(f"--attribute {text!r} is not NAME=VALUE — write it as e.g. model=x1")
    if name in OWN_ATTRIBUTES:
        raise ConfigError(
            f"--attribute {name}: every fake device publishes its own {name} — use another name"
        )
    if _INT.fullmatch(value):
        return name, int(value)
    if value in ("true", "false"):
        return name, value == "true"
    return name, value


def parse_capacity(text: str) -> tuple[str, str]:
    name, equals, quantity = text.partition("=")
    if not equals or not name or not quantity:
        raise ConfigError(f"--capacity {text!r} is not NAME=QUANTITY — write it as e.g. memory=16Gi")
    return name, quantity


@dataclass(frozen=True)
class FakeConfig:
    resource: str
    count: int
    numa_nodes: int = 0
    numa_layout: NumaLayout = "round-robin"
    unhealthy: frozenset[str] = frozenset()
    preferred: bool = False
    prestart: bool = False
    cdi: bool = False
    #: Where spec files go; None: the plugin's default (`DevicePlugin.cdi_spec_dir`).
    cdi_spec_dir: str | None = None
    health_file: str | None = None
    poll_interval: float = 1.0
    #: The DRA face: the driver name, which face(s) devices go to, and what every device publishes.
    driver: str = ""
    api: FakeApi = "device-plugin"
    attributes: Mapping[str, str | int | bool] = field(default_factory=dict)
    capacity: Mapping[str, str] = field(default_factory=dict)
    #: DRA only: partitions, shared devices, binding conditions (fake_dra.py); taints of `--taint`
    #: (device, taint: None for every device) and the taint of unhealthy devices.
    shape: DRAShape = field(default_factory=DRAShape)
    taints: tuple[tuple[str | None, DeviceTaint], ...] = ()
    health_taint: DeviceTaint | None = None

    def __post_init__(self) -> None:
        if self.api in ("device-plugin", "both") or self.resource:
            check_resource_name(self.resource)
        if self.api in ("dra", "both") or self.driver:
            check_driver_name(self.driver)
        if self.count < 0:
            raise ConfigError(f"device count must be >= 0, got {self.count}")
        if self.numa_nodes < 0:
            raise ConfigError(f"NUMA node count must be >= 0, got {self.numa_nodes}")
        if self.numa_layout not in ("round-robin", "block"):
            raise ConfigError(f"NUMA layout must be round-robin or block, got {self.numa_layout!r}")
        if self.poll_interval <= 0:
            raise ConfigError(f"poll interval must be > 0, got {self.poll_interval}")
        if self.driver and self.api != "device-plugin":
            try:
                validate_kind(self.dra_kind)
            except CDIError as exc:
                raise ConfigError(
                    f"--driver: the DRA devices' CDI kind is {self.dra_kind}, and {exc}"
                ) from None
        if self.cdi:
            if not self.resource:
                raise ConfigError("--cdi names devices by the resource name — add --resource")
            try:
                validate_kind(self.resource)
            except CDIError as exc:
                raise ConfigError(f"--cdi: the resource name is the CDI kind, and {exc}") from None
            try:
                if self.cdi_spec_dir is not None:
                    check_spec_dir(Path(self.cdi_spec_dir))
            except CDIError as exc:
                raise ConfigError(str(exc)) from None
        unknown = sorted(self.unhealthy - set(self.device_ids()))
        if unknown:
            raise ConfigError(f"unknown device IDs in unhealthy list: {', '.join(unknown)}")
        unknown = sorted({d for d, _ in self.taints if d is not None} - set(self.device_ids()))
        if unknown:
            raise ConfigError(
                f"--taint names unknown devices: {', '.join(unknown)} — see the device IDs in --help"
            )
        dra_only = self.shape != DRAShape() or self.taints or self.health_taint is not None
        if dra_only and self.api != "dra":
            raise ConfigError(
                "--partitions, --shared, --net, --binding-delay, --taint and --health-taint are DRA "
                "features — use --driver without --resource (or --api dra)"
            )

    @property
    def prefix(self) -> str:
        """Device IDs: fake-N, or on DRA <first label of the driver>-N (gpu.example.com: gpu-N), or nic-N
        with `--net` (the example driver's NIC names)."""
        if self.shape.net:
            return "nic"
        return self.driver.split(".", 1)[0] if self.driver and self.api != "device-plugin" else "fake"

    @property
    def dra_kind(self) -> str:
        """The CDI kind of the DRA face's devices: <driver>/<first label> (gpu.example.com/gpu)."""
        return f"{self.driver}/{self.prefix}"

    def gpu_ids(self) -> list[str]:
        """The fake GPUs: each a device, or with partitions each a counter set and its devices."""
        return [f"{self.prefix}-{i}" for i in range(self.count)]

    def device_ids(self) -> list[str]:
        return self.shape.device_ids(self.gpu_ids()) if self.api == "dra" else self.gpu_ids()

    def face_of(self, index: int) -> Face:
        """Under api "both", the first half of the devices (rounded down) is on the device plugin face."""
        if self.api != "both":
            return self.api
        return "device-plugin" if index < self.count // 2 else "dra"

    def numa_of(self, index: int) -> tuple[int, ...]:
        if self.numa_nodes == 0:
            return ()
        if self.numa_layout == "round-robin":
            return (index % self.numa_nodes,)
        return (index * self.numa_nodes // max(self.count, 1),)


class FakePlugin(DevicePlugin):
    def __init__(self, config: FakeConfig) -> None:
        self.config = config
        self.resource_name = config.resource
        self.driver_name = config.driver
        self.poll_interval = config.poll_interval
        self.cdi_spec_dir = config.cdi_spec_dir
        self.health_taint = config.health_taint
        self._file = HealthFile()
        self._file_stamp: tuple[int, int, int] | None = None
        self._warned_missing = False
        delay = config.shape.binding_delay
        self._binding = BindingMarker(delay) if delay is not None else None

    def options(self) -> PluginOptions:
        # The flags decide what is advertised, so one class can play every kind of plugin.
        return PluginOptions(
            pre_start_required=self.config.prestart,
            get_preferred_allocation_available=self.config.preferred,
        )

    async def devices(self) -> Sequence[Device]:
        if self._binding is not None:
            await mark_bound(self, self._binding)
        state = await self._health_from_file()
        unhealthy = self.config.unhealthy | state.unhealthy
        name = self.config.driver or self.config.resource
        gpus = {gpu: i for i, gpu in enumerate(self.config.gpu_ids())}
        out = []
        for i, device_id in enumerate(self.config.device_ids()):
            gpu = gpus[self.config.shape.gpu_of(device_id)] if self.config.api == "dra" else i
            shaped = self.config.shape.fields(device_id) if self.config.api == "dra" else {}
            attributes, capacity = shaped.pop("attributes", {}), shaped.pop("capacity", {})
            out.append(
                Device(
                    device_id,
                    device_id not in unhealthy,
                    self.config.numa_of(gpu),
                    attributes={
                        **self.config.attributes,
                        **attributes,
                        "index": gpu,
                        # Stable across restarts: a user's selector on it keeps matching the same device.
                        "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"kubedevice-fake/{name}/{device_id}")),
                    },
                    capacity={**self.config.capacity, **capacity},
                    api=self.config.face_of(gpu),
                    taints=device_taints(device_id, self.config.taints, state.taints),
                    **shaped,
                )
            )
        return out

    def shared_counters(self, devices: Sequence[Device]) -> Sequence[CounterSet]:
        return self.config.shape.counter_sets(self.config.gpu_ids())

    def cdi_spec(self, devices: Sequence[Device]) -> CDISpec | None:
        # Called once per face with that face's devices: the DRA face always has a spec of its own kind
        # (DRA hands a container CDI devices only), the device plugin face one with --cdi.
        dra = bool(devices) and devices[0].api == "dra"
        if not devices or not (dra or self.config.cdi):
            return None
        # Each device sets its own variable, so a container given several sees every one of them.
        return CDISpec(
            kind=self.config.dra_kind if dra else self.config.resource,
            devices=tuple(CDIDevice(d.id, ContainerEdits(env=(_cdi_env(d.id),))) for d in devices),
        )

    async def allocate(self, devices: Sequence[Device]) -> Allocation:
        if devices and devices[0].api == "dra":
            # A DRA claim's devices: their CDI IDs, in the claim's order, and nothing else.
            return Allocation(cdi_devices=[f"{self.config.dra_kind}={d.id}" for d in devices])
        ids = sorted(d.id for d in devices)
        spec = self.cdi_spec(devices)
        cdi = spec.qualified_names(ids) if spec is not None else []
        return Allocation(envs={"FAKE_DEVICES": ",".join(ids)}, cdi_devices=cdi)

    async def preferred_allocation(
        self, available: Sequence[Device], must_include: Sequence[Device], size: int
    ) -> Sequence[str]:
        return prefer_numa_packed(available, must_include, size)

    async def pre_start_container(self, devices: Sequence[Device]) -> None:
        log.info("PreStartContainer for %s", ",".join(sorted(d.id for d in devices)))

    async def _health_from_file(self) -> HealthFile:
        path = self.config.health_file
        if path is None:
            return self._file
        try:
            stamp, text = await asyncio.to_thread(_read_if_changed, path, self._file_stamp)
        except FileNotFoundError:
            if self._file_stamp is not None or not self._warned_missing:
                # Said once per disappearance: a missing file means every device is healthy.
                log.warning("health file %s does not exist: every device is healthy until it does", path)
                self._warned_missing = True
            self._file_stamp, self._file = None, HealthFile()
            return self._file
        except OSError as exc:
            log.error("cannot read health file %s: %s; keeping the previous health", path, exc.strerror)
            return self._file
        if text is None:
            return self._file
        self._file_stamp = stamp
        try:
            self._file = parse_health_file(text, set(self.config.device_ids()))
        except ValueError as exc:
            log.error("health file %s: %s; keeping the previous health", path, exc)
        return self._file


def _cdi_env(device_id: str) -> str:
    suffix = "".join(c if c.isalnum() else "_" for c in device_id).upper()
    return f"FAKE_CDI_{suffix}={device_id}"


@dataclass(frozen=True)
class HealthFile:
    """What the health file says: the unhealthy devices, and (DRA) each device's taints."""

    unhealthy: frozenset[str] = frozenset()
    taints: Mapping[str, tuple[DeviceTaint, ...]] = field(default_factory=dict)


def parse_health_file(text: str, known: set[str]) -> HealthFile:
    """A JSON list of unhealthy device IDs, or an object `{"unhealthy": [IDs], "taints": {ID:
    ["KEY[=VALUE]:EFFECT", ...]}}`; an empty file means every device healthy and untainted."""
    if not text.strip():
        return HealthFile()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at line {exc.lineno})") from None
    shape = 'must be a JSON list of device ID strings, or an object {"unhealthy": [...], "taints": {...}}'
    if isinstance(data, dict) and set(data) <= {"unhealthy", "taints"}:
        unhealthy, taints = data.get("unhealthy", []), data.get("taints", {})
    else:
        unhealthy, taints = data, {}
    if not isinstance(unhealthy, list) or not all(isinstance(item, str) for item in unhealthy):
        raise ValueError(shape)
    if not isinstance(taints, dict) or not all(
        isinstance(v, list) and all(isinstance(t, str) for t in v) for v in taints.values()
    ):
        raise ValueError('"taints" must map device IDs to lists of KEY[=VALUE]:EFFECT strings')
    unknown = sorted((set(unhealthy) | set(taints)) - known)
    if unknown:
        raise ValueError(f"unknown device IDs: {', '.join(unknown)}")
    try:
        parsed = {
            device: tuple(parse_taint(t, "taint")[1] for t in texts) for device, texts in taints.items()
        }
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    return HealthFile(frozenset(unhealthy), parsed)


def _read_if_changed(
    path: str, stamp: tuple[int, int, int] | None
) -> tuple[tuple[int, int, int], str | None]:
    st = os.stat(path)
    current = (st.st_ino, st.st_mtime_ns, st.st_size)
    if current == stamp:
        return current, None
    with open(path, encoding="utf-8") as handle:
        return current, handle.read()


def prefer_numa_packed(available: Sequence[Device], must_include: Sequence[Device], size: int) -> list[str]:
    """Pick `size` devices: must_include first, then their NUMA nodes, then as few other nodes as possible.

    Within a node IDs go in sorted order; devices without topology come last. Deterministic, so
    tests and the conformance checker can predict the answer.
    """
    chosen = sorted({d.id for d in must_include})
    taken = set(chosen)
    by_node: dict[int | None, list[str]] = defaultdict(list)
    for device in sorted(available, key=lambda d: d.id):
        if device.id not in taken:
            by_node[device.numa_nodes[0] if device.numa_nodes else None].append(device.id)
    home = sorted({n for d in must_include for n in d.numa_nodes})

    def take(node: int | None) -> None:
        while by_node[node] and len(chosen) < size:
            chosen.append(by_node[node].pop(0))

    for node in home:
        take(node)
    while len(chosen) < size:
        nodes = [n for n in by_node if n is not None and by_node[n]]
        if not nodes:
            break
        need = size - len(chosen)
        # A node that can cover the rest alone wins (the smallest such, to keep big nodes whole);
        # otherwise the biggest node, to spread over as few nodes as possible.
        enough = [n for n in nodes if len(by_node[n]) >= need]
        node = (
            min(enough, key=lambda n: (len(by_node[n]), n))
            if enough
            else max(nodes, key=lambda n: (len(by_node[n]), -n))
        )
        take(node)
    take(None)
    return chosen
