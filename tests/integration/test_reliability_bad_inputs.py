"""The bad-input catalogue (docs/bad-inputs.md): one table, every entry point of the node.

Each case runs against an in-process node daemon (real gRPC over real unix sockets, real files) that
already has a healthy plugin (`example.com/good`) and a Running pod using it. The case feeds one bad input
and checks what the user sees (a gRPC status and message, a pod's reason and message, a manifest report,
a checkpoint error); then the same checks run for every case: the daemon still serves, the good pod keeps
its devices, the good plugin keeps its capacity, and a new pod for it is admitted.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio
import pytest

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.podresources.v1 import api_pb2 as pr
from kubedevice.api.podresources.v1 import api_pb2_grpc as pr_grpc
from kubedevice.checkpoint import CheckpointData, PodDevicesEntry, encode
from kubedevice.node.daemon import NodeConfig, NodeDaemon, NodePaths
from tests.integration.fakeplugin import FakePlugin, device, make_devices
from tests.node_helpers import ALIAS_BOMB, async_wait_for, pod_manifest, short_tmpdir

GOOD = "example.com/good"
BAD = "example.com/bad"


@dataclass
class Node:
    daemon: NodeDaemon
    good: FakePlugin
    good_devices: list[str]
    plugins: list[FakePlugin]

    @property
    def paths(self) -> NodePaths:
        return self.daemon.paths

    def pod(self, name: str) -> dict[str, object] | None:
        for record in self.daemon.pods:
            if record.pod.name == name:
                return {"phase": record.phase, "reason": record.reason, "message": record.message}
        return None

    async def wait_phase(self, name: str, *phases: str) -> dict[str, object]:
        found = await async_wait_for(
            lambda: (p := self.pod(name)) is not None and p["phase"] in phases and p,
            f"pod {name} to be {'/'.join(phases)}",
        )
        return dict(found)

    def write(self, name: str, content: str | bytes) -> Path:
        path = self.paths.manifests / name
        tmp = path.with_name("." + name + ".tmp")
        tmp.write_bytes(content.encode() if isinstance(content, str) else content)
        os.replace(tmp, path)
        return path

    async def bad_file(self, name: str) -> str:
        error: str = await async_wait_for(lambda: self.daemon.bad_files.get(name), f"{name} to be reported")
        return error

    async def plugin(self, plugin: FakePlugin) -> FakePlugin:
        await plugin.start()
        self.plugins.append(plugin)
        return plugin

    async def register(self, request: dp.RegisterRequest) -> str:
        """Register with kubelet.sock; what the plugin sees: "OK" or "CODE: message"."""
        async with grpc.aio.insecure_channel(f"unix://{self.paths.kubelet_socket}") as channel:
            call = channel.unary_unary("/v1beta1.Registration/Register", request_serializer=None)
            return await _outcome(call(request.SerializeToString(), timeout=15))

    def devices_of(self, name: str, resource: str = GOOD) -> list[str]:
        manager = self.daemon.manager
        assert manager is not None
        for record in self.daemon.pods:
            if record.pod.name == name:
                held = manager.get_devices(record.uid, "main") or {}
                return sorted(held.get(resource, {}))
        return []


async def _outcome(call: Awaitable[object]) -> str:
    try:
        await call
    except grpc.aio.AioRpcError as err:
        return f"{err.code().name}: {err.details()}"
    return "OK"


def _checkpoint_bytes(*, device_ids: object = None) -> bytes:
    data = CheckpointData(
        [PodDevicesEntry("uid-1", "main", GOOD, {0: ["good0"]}, b"")], {GOOD: ["good0", "good1"]}
    )
    blob = encode(data)
    if device_ids is not None:
        doc = json.loads(blob)
        doc["Data"]["PodDeviceEntries"][0]["DeviceIDs"] = device_ids
        blob = json.dumps(doc).encode()
    return blob


@pytest.fixture
async def node_factory() -> AsyncIterator[Callable[[Callable[[NodePaths], None] | None], Awaitable[Node]]]:
    made: list[tuple[Node, Path]] = []

    async def make(prepare: Callable[[NodePaths], None] | None = None) -> Node:
        root = short_tmpdir("kd-bad-")
        if prepare is not None:
            paths = NodePaths.under(root)
            paths.plugin_dir.mkdir(parents=True, mode=0o750)
            paths.manifests.mkdir(parents=True)
            prepare(paths)
        daemon = NodeDaemon(NodeConfig(root_dir=root, scan_interval=0.05, plugin_timeout=5.0))
        await daemon.start()
        good = FakePlugin(daemon.paths.plugin_dir / "good.sock", GOOD, make_devices(4, prefix="good"))
        node = Node(daemon, good, [], [])
        made.append((node, root))
        await node.plugin(good)
        await good.register(daemon.paths.kubelet_socket)
        # The manifest is admitted as soon as it is written: the plugin's first list must be in by then.
        await async_wait_for(
            lambda: daemon.manager is not None and daemon.manager.get_capacity()[1].get(GOOD) == 4,
            "the good plugin's devices to be allocatable",
        )
        node.write("good.yaml", pod_manifest("good", {GOOD: 1}))
        await node.wait_phase("good", "Running")
        node.good_devices = node.devices_of("good")
        return node

    yield make
    for node, root in made:
        for plugin in node.plugins:
            await plugin.stop()
        await node.daemon.stop()
        shutil.rmtree(root, ignore_errors=True)


async def assert_untouched(node: Node) -> None:
    manager = node.daemon.manager
    assert manager is not None
    assert node.pod("good") == {"phase": "Running", "reason": "", "message": ""}
    assert node.devices_of("good") == node.good_devices
    capacity, allocatable, _ = manager.get_capacity()
    assert capacity[GOOD] == 4 and allocatable[GOOD] == 4
    node.write("after.yaml", pod_manifest("after", {GOOD: 1}))
    await node.wait_phase("after", "Running")
    assert set(node.devices_of("after")).isdisjoint(node.good_devices)
    async with grpc.aio.insecure_channel(f"unix://{node.paths.pod_resources_socket}") as channel:
        listed = await pr_grpc.PodResourcesListerStub(channel).List(pr.ListPodResourcesRequest(), timeout=5)
    assert {p.name for p in listed.pod_resources} >= {"good", "after"}


# ----------------------------------------------------------------------------------------------------
# The catalogue: (case id, where, what it does -> what the user sees, the fragment expected in it)
# A registration whose socket cannot be dialled costs the kubelet's 10 s dial; those cases live in
# tests/integration/test_manager_registration.py with a short dial timeout.

Case = Callable[[Node], Awaitable[str]]


def _register(**fields: object) -> Case:
    async def case(node: Node) -> str:
        request = dp.RegisterRequest(version="v1beta1", resource_name=BAD, endpoint="bad.sock")
        for name, value in fields.items():
            setattr(request, name, value)
        return await node.register(request)

    return case


async def _register_raw(node: Node, raw: bytes) -> str:
    async with grpc.aio.insecure_channel(f"unix://{node.paths.kubelet_socket}") as channel:
        call = channel.unary_unary("/v1beta1.Registration/Register", request_serializer=None)
        return await _outcome(call(raw, timeout=5))


async def _symlink_endpoint(node: Node) -> str:
    outside = short_tmpdir("kd-out-")
    os.symlink(outside / "x.sock", node.paths.plugin_dir / "link.sock")
    try:
        return await _register(endpoint="link.sock")(node)
    finally:
        shutil.rmtree(outside)


def _snapshot(devices: list[dp.Device], check: Callable[[Node], str | None]) -> Case:
    """A plugin whose ListAndWatch sends `devices`; `check` returns what the node says once it has them."""

    async def case(node: Node) -> str:
        plugin = await node.plugin(FakePlugin(node.paths.plugin_dir / "bad.sock", BAD, devices))
        await plugin.register(node.paths.kubelet_socket)
        seen: str = await async_wait_for(lambda: check(node), "the snapshot's effect")
        return seen

    return case


def _warning(node: Node) -> str | None:
    manager = node.daemon.manager
    assert manager is not None
    return next((r.last_warning for r in manager.registered_resources() if r.resource_name == BAD), None)


def _counts(node: Node) -> str | None:
    manager = node.daemon.manager
    assert manager is not None
    for r in manager.registered_resources():
        if r.resource_name == BAD and (r.healthy or r.unhealthy):
            return f"healthy {r.healthy} unhealthy {r.unhealthy}"
    return None


#: Over gRPC's 4 MiB default, where the kubelet's stream breaks; the manager accepts it.
_HUGE_LIST = [dp.Device(ID=f"{i:08d}" + "x" * 1000, health="Healthy") for i in range(5000)]


def _allocation(plugin_kwargs: Callable[[], dict[str, object]], count: int = 1) -> Case:
    """A plugin built with `plugin_kwargs`; a pod asks for `count` of its devices; the pod's outcome."""

    async def case(node: Node) -> str:
        plugin = FakePlugin(
            node.paths.plugin_dir / "bad.sock", BAD, make_devices(3, prefix="bad"), **plugin_kwargs()
        )
        await node.plugin(plugin)
        await plugin.register(node.paths.kubelet_socket)
        await async_wait_for(lambda: _counts(node), "the bad plugin's devices")
        node.write("victim.yaml", pod_manifest("victim", {BAD: count}))
        pod = await node.wait_phase("victim", "Running", "Failed")
        if pod["phase"] == "Running":
            return f"Running with {node.devices_of('victim', BAD)}"
        return f"{pod['reason']}: {pod['message']}"

    return case


async def _no_responses(request: dp.AllocateRequest) -> dp.AllocateResponse:
    return dp.AllocateResponse()


async def _two_responses(request: dp.AllocateRequest) -> dp.AllocateResponse:
    return dp.AllocateResponse(
        container_responses=[dp.ContainerAllocateResponse(), dp.ContainerAllocateResponse()]
    )


async def _huge_response(request: dp.AllocateRequest) -> dp.AllocateResponse:
    resp = dp.AllocateResponse()
    resp.container_responses.add().envs["BIG"] = "x" * (5 << 20)
    return resp


async def _failing_allocate(request: dp.AllocateRequest) -> dp.AllocateResponse:
    raise RuntimeError("the hardware is on fire")


async def _prefers_strangers(request: dp.PreferredAllocationRequest) -> dp.PreferredAllocationResponse:
    # IDs it was not offered, an unhealthy one, and too many: all must be ignored.
    return dp.PreferredAllocationResponse(
        container_responses=[
            dp.ContainerPreferredAllocationResponse(deviceIDs=["ghost", "bad2", "bad0", "bad1"])
        ]
    )


def _preferred(
    handler: Callable[[dp.PreferredAllocationRequest], Awaitable[dp.PreferredAllocationResponse]],
) -> Callable[[], dict[str, object]]:
    return lambda: {
        "options": dp.DevicePluginOptions(get_preferred_allocation_available=True),
        "preferred": handler,
    }


async def _failing_preferred(request: dp.PreferredAllocationRequest) -> dp.PreferredAllocationResponse:
    raise RuntimeError("no preference today")


def _podresources(method: str, request: bytes) -> Case:
    async def case(node: Node) -> str:
        async with grpc.aio.insecure_channel(f"unix://{node.paths.pod_resources_socket}") as channel:
            call = channel.unary_unary(
                f"/v1.PodResourcesLister/{method}", request_serializer=None, response_deserializer=None
            )
            return await _outcome(call(request, timeout=5))

    return case


async def _podresources_flood(node: Node) -> str:
    async with grpc.aio.insecure_channel(f"unix://{node.paths.pod_resources_socket}") as channel:
        stub = pr_grpc.PodResourcesListerStub(channel)
        outcomes = [await _outcome(stub.List(pr.ListPodResourcesRequest(), timeout=5)) for _ in range(40)]
    refused = [o for o in outcomes if o != "OK"]
    assert outcomes[0] == "OK" and refused
    return refused[0]


def _manifest(content: str | bytes, name: str = "bad.yaml") -> Case:
    async def case(node: Node) -> str:
        node.write(name, content)
        return await node.bad_file(name)

    return case


def _special_file(make: Callable[[Path], object], name: str = "bad.yaml") -> Case:
    """A FIFO or a socket named like a manifest, made in the folder itself (as `mkfifo` would)."""

    async def case(node: Node) -> str:
        path = node.paths.manifests / name
        made = make(path)
        try:
            return await node.bad_file(name)
        finally:
            if isinstance(made, socket.socket):
                made.close()

    return case


def _listening_socket(path: Path) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen()
    return listener


#: A pod, then 9 levels of 9 aliases (under 1 KB in all): 490 million nodes once expanded.
_ALIAS_BOMB = pod_manifest("bomb", {GOOD: 1}) + ALIAS_BOMB


async def _symlinked_manifest(node: Node) -> str:
    outside = short_tmpdir("kd-out-")
    (outside / "evil.yaml").write_text(pod_manifest("evil", {GOOD: 1}))
    os.symlink(outside / "evil.yaml", node.paths.manifests / "evil.yaml")
    try:
        return await node.bad_file("evil.yaml")
    finally:
        shutil.rmtree(outside)


async def _duplicate_pod(node: Node) -> str:
    node.write("twin.yaml", pod_manifest("good", {GOOD: 1}))
    return await node.bad_file("twin.yaml")


async def _duplicate_claim(node: Node) -> str:
    claim = (
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c1}\n"
        "spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu}}]}}\n"
    )
    node.write("a-claim.yaml", claim)
    node.write("b-claim.yaml", claim)
    return await node.bad_file("b-claim.yaml")


async def _unknown_fields_manifest(node: Node) -> str:
    text = pod_manifest("extra", {GOOD: 1}).replace("spec:\n", "spec:\n  futureField: {a: 1}\n")
    node.write("extra.yaml", "surprise: true\n" + text)
    pod = await node.wait_phase("extra", "Running", "Failed")
    return str(pod["phase"])


async def _greedy_manifest(node: Node) -> str:
    node.write("greedy.yaml", pod_manifest("greedy", {GOOD: 10**18}))
    pod = await node.wait_phase("greedy", "Failed")
    return f"{pod['reason']}: {pod['message']}"


def _checkpoint(write: Callable[[Path], None]) -> Callable[[NodePaths], None]:
    return lambda paths: write(paths.checkpoint)


async def _checkpoint_outcome(node: Node) -> str:
    manager = node.daemon.manager
    assert manager is not None
    return manager.checkpoint_error or "no error"


def _write(blob: bytes) -> Callable[[Path], None]:
    return lambda path: path.write_bytes(blob)


def _sparse_huge(path: Path) -> None:
    with path.open("wb") as f:
        f.truncate(300 << 20)  # sparse: no disk used, but over the 256 MiB limit


def _symlink_checkpoint(path: Path) -> None:
    target = path.parent.parent / "elsewhere.json"
    target.write_text("not json at all")
    os.symlink(target, path)


def _fifo_checkpoint(path: Path) -> None:
    os.mkfifo(path)


def _directory_checkpoint(path: Path) -> None:
    path.mkdir()


_VALID = _checkpoint_bytes()
_WRONG_CHECKSUM = _VALID.replace(b'"Checksum":', b'"Checksum":1')
_UNKNOWN_FIELD = _VALID.replace(b'{"Data":', b'{"Future":[1,2],"Data":')

#: (id, where, case, fragment of what the user sees, checkpoint preparation)
CASES: list[tuple[str, str, Case, str, Callable[[NodePaths], None] | None]] = [
    # Registration API (kubelet.sock)
    (
        "reg-version",
        "Register",
        _register(version="v1alpha"),
        'INVALID_ARGUMENT: requested API version "v1alpha" is not supported by kubelet',
        None,
    ),
    (
        "reg-empty-version",
        "Register",
        _register(version=""),
        'requested API version "" is not supported',
        None,
    ),
    (
        "reg-no-domain",
        "Register",
        _register(resource_name="gpu"),
        'INVALID_ARGUMENT: the ResourceName "gpu" is invalid',
        None,
    ),
    (
        "reg-native",
        "Register",
        _register(resource_name="kubernetes.io/gpu"),
        'the ResourceName "kubernetes.io/gpu" is invalid',
        None,
    ),
    (
        "reg-upper-domain",
        "Register",
        _register(resource_name="Example.com/gpu"),
        'the ResourceName "Example.com/gpu" is invalid',
        None,
    ),
    (
        "reg-requests-prefix",
        "Register",
        _register(resource_name="requests.example.com/gpu"),
        "is invalid",
        None,
    ),
    ("reg-long-name", "Register", _register(resource_name="example.com/" + "g" * 64), "is invalid", None),
    (
        "reg-dotdot",
        "Register",
        _register(endpoint="../escape.sock"),
        'INVALID_ARGUMENT: invalid endpoint "../escape.sock": it escapes to',
        None,
    ),
    (
        "reg-absolute",
        "Register",
        _register(endpoint="/tmp/abs.sock"),
        "an absolute path is not allowed",
        None,
    ),
    ("reg-symlink", "Register", _symlink_endpoint, "it resolves through a symlink to", None),
    ("reg-empty-endpoint", "Register", _register(endpoint=""), "INVALID_ARGUMENT: invalid endpoint ''", None),
    (
        "reg-nul-endpoint",
        "Register",
        _register(endpoint="a\x00b.sock"),
        "INVALID_ARGUMENT: invalid endpoint",
        None,
    ),
    (
        "reg-long-endpoint",
        "Register",
        _register(endpoint="s" * 120 + ".sock"),
        "is longer than 107 bytes",
        None,
    ),
    (
        "reg-garbage",
        "Register",
        lambda node: _register_raw(node, b"\xff\xfe garbage \x00"),
        "Error parsing message with type 'v1beta1.RegisterRequest'",
        None,
    ),
    (
        "reg-non-utf8",
        "Register",
        lambda node: _register_raw(node, b"\x0a\x07v1beta1\x1a\x03\xff\xfe\xfd"),
        "String field had bad UTF-8",
        None,
    ),
    (
        "reg-truncated",
        "Register",
        lambda node: _register_raw(
            node, dp.RegisterRequest(version="v1beta1", resource_name=BAD).SerializeToString()[:-3]
        ),
        "Error parsing message with type 'v1beta1.RegisterRequest'",
        None,
    ),
    # ListAndWatch content
    (
        "law-duplicate-ids",
        "ListAndWatch",
        _snapshot([device("d0"), device("d0"), device("d1")], _warning),
        "duplicate device IDs in one ListAndWatch snapshot for example.com/bad: 'd0'",
        None,
    ),
    (
        "law-lowercase-health",
        "ListAndWatch",
        _snapshot([device("d0", "healthy"), device("d1")], _warning),
        "unknown health strings for example.com/bad",
        None,
    ),
    (
        "law-empty-health",
        "ListAndWatch",
        _snapshot([device("d0", ""), device("d1")], _counts),
        "healthy 1 unhealthy 1",
        None,
    ),
    (
        "law-empty",
        "ListAndWatch",
        _snapshot(
            [],
            lambda node: (
                "registered"
                if _counts(node) is None
                and _warning(node) is None
                and any(r.resource_name == BAD for r in node.daemon.manager.registered_resources())
                else None
            ),
        ),
        "registered",
        None,
    ),  # type: ignore[union-attr]
    (
        "law-weird-ids",
        "ListAndWatch",
        _snapshot([device("a b"), device("c]\nd"), device("é😀")], _counts),
        "healthy 3 unhealthy 0",
        None,
    ),
    ("law-huge", "ListAndWatch", _snapshot(_HUGE_LIST, _counts), "healthy 5000 unhealthy 0", None),
    # Allocate and GetPreferredAllocation responses
    (
        "alloc-no-responses",
        "Allocate",
        _allocation(lambda: {"allocate": _no_responses}),
        "UnexpectedAdmissionError: no containers return in allocation response",
        None,
    ),
    (
        "alloc-error",
        "Allocate",
        _allocation(lambda: {"allocate": _failing_allocate}),
        "UnexpectedAdmissionError: device plugin Allocate rpc for example.com/bad failed with err:",
        None,
    ),
    (
        "alloc-huge",
        "Allocate",
        _allocation(lambda: {"allocate": _huge_response}),
        "Running with ['bad0']",
        None,
    ),
    (
        "alloc-two-responses",
        "Allocate",
        _allocation(lambda: {"allocate": _two_responses}),
        "Running with ['bad0']",
        None,
    ),
    (
        "alloc-too-many",
        "Allocate",
        _allocation(dict, count=5),
        "requested number of devices unavailable for example.com/bad. Requested: 5, Available: 3",
        None,
    ),
    (
        "pref-strangers",
        "GetPreferredAllocation",
        _allocation(_preferred(_prefers_strangers), count=2),
        "Running with ['bad0', 'bad1']",
        None,
    ),
    (
        "pref-error",
        "GetPreferredAllocation",
        _allocation(_preferred(_failing_preferred), count=2),
        "device plugin GetPreferredAllocation rpc for example.com/bad failed with err:",
        None,
    ),
    # PodResources
    (
        "pr-unknown-pod",
        "PodResources Get",
        _podresources(
            "Get", pr.GetPodResourcesRequest(pod_name="nope", pod_namespace="x").SerializeToString()
        ),
        "NOT_FOUND: pod nope in namespace x not found",
        None,
    ),
    (
        "pr-empty-name",
        "PodResources Get",
        _podresources("Get", b""),
        "NOT_FOUND: pod  in namespace  not found",
        None,
    ),
    (
        "pr-garbage",
        "PodResources List",
        _podresources("List", b"\xff\xff\xff\xff"),
        "Error parsing message with type 'v1.ListPodResourcesRequest'",
        None,
    ),
    (
        "pr-non-utf8",
        "PodResources Get",
        _podresources("Get", b"\x0a\x02\xff\xfe"),
        "String field had bad UTF-8",
        None,
    ),
    (
        "pr-huge-name",
        "PodResources Get",
        _podresources("Get", pr.GetPodResourcesRequest(pod_name="p" * 100_000).SerializeToString()),
        "NOT_FOUND: pod " + "p" * 256 + "... (100000 characters) in namespace  not found",
        None,
    ),
    (
        "pr-flood",
        "PodResources List",
        _podresources_flood,
        "RESOURCE_EXHAUSTED: rejected by rate limit",
        None,
    ),
    # Manifests
    (
        "mf-yaml-garbage",
        "manifest",
        _manifest("kind: [\n  - {"),
        "YAML error at line 2, column 3: expected the node content, but found '-'",
        None,
    ),
    (
        "mf-helm-template",
        "manifest",
        _manifest("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ .Release.Name }}\n"),
        "looks like a Helm template ({{ at line 4, column 9) — render it with `helm template` first",
        None,
    ),
    ("mf-empty-file", "manifest", _manifest(b""), "no document in the file", None),
    ("mf-non-utf8", "manifest", _manifest(b"kind: Pod\nname: \xff\xfe\n"), "not UTF-8 text", None),
    (
        "mf-json-truncated",
        "manifest",
        _manifest('{"apiVersion": "v1", "kind": "Pod", "metadata": {"na', "x.json"),
        "JSON error",
        None,
    ),
    (
        "mf-wrong-kind",
        "manifest",
        _manifest("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"),
        'unsupported kind "Service" (apiVersion "v1") — supported: Pod, Namespace, ResourceClaim, '
        "ResourceClaimTemplate, DeviceClass, DeviceTaintRule",
        None,
    ),
    (
        "mf-old-version",
        "manifest",
        _manifest("apiVersion: resource.k8s.io/v1alpha3\nkind: ResourceClaim\nmetadata: {name: c}\n"),
        'kind ResourceClaim: apiVersion "resource.k8s.io/v1alpha3" is not supported '
        "(use resource.k8s.io/v1, v1beta2 or v1beta1)",
        None,
    ),
    (
        "mf-no-kind",
        "manifest",
        _manifest(pod_manifest("k", {GOOD: 1}) + "---\nkind: 7\n"),
        "document 2: no kind",
        None,
    ),
    (
        "mf-claim-count",
        "manifest",
        _manifest(
            "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\n"
            "spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu, count: 0}}]}}\n"
        ),
        "ResourceClaim default/c: spec.devices.requests[0].exactly.count: must be at least 1, not 0",
        None,
    ),
    (
        "mf-claim-toleration",
        "manifest",
        _manifest(
            "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\n"
            "spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu, "
            "tolerations: [{key: k, operator: Exists, value: v}]}}]}}\n"
        ),
        "ResourceClaim default/c: spec.devices.requests[0].exactly.tolerations[0].value: "
        "must be empty for operator `Exists`",
        None,
    ),
    (
        "mf-taint-rule",
        "manifest",
        _manifest(
            "apiVersion: resource.k8s.io/v1\nkind: DeviceTaintRule\nmetadata: {name: r}\n"
            "spec: {deviceSelector: {device: gpu-0}, taint: {key: k, effect: PreferNoSchedule}}\n"
        ),
        "DeviceTaintRule r: spec.taint.effect: Unsupported value: 'PreferNoSchedule': "
        'supported values: "NoExecute", "NoSchedule", "None"',
        None,
    ),
    (
        "mf-pod-claim",
        "manifest",
        _manifest(
            pod_manifest("pc", {GOOD: 1}).replace("spec:\n", "spec:\n  resourceClaims: [{name: gpu}]\n", 1)
        ),
        "pod default/pc: spec.resourceClaims[0]: "
        "exactly one of resourceClaimName or resourceClaimTemplateName must be set",
        None,
    ),
    (
        "mf-claim-twice",
        "manifest",
        _duplicate_claim,
        "ResourceClaim default/c1 is already defined by a-claim.yaml",
        None,
    ),
    ("mf-scalar", "manifest", _manifest("just a string\n"), "not an object (a str, not a mapping)", None),
    (
        "mf-limits-text",
        "manifest",
        _manifest(pod_manifest("t", {GOOD: "lots"})),
        "limits of example.com/good",
        None,
    ),
    ("mf-negative", "manifest", _manifest(pod_manifest("n", {GOOD: -1})), "limits of example.com/good", None),
    (
        "mf-fraction",
        "manifest",
        _manifest(pod_manifest("f", {GOOD: "500m"})),
        "not a whole number of devices",
        None,
    ),
    (
        "mf-containers-map",
        "manifest",
        _manifest("apiVersion: v1\nkind: Pod\nmetadata: {name: m}\nspec: {containers: {a: 1}}\n"),
        "spec.containers must be a list",
        None,
    ),
    (
        "mf-bad-resource",
        "manifest",
        _manifest(pod_manifest("r", {"Bad.Domain/x": 1})),
        "'Bad.Domain/x' is not a valid extended resource name",
        None,
    ),
    ("mf-symlink", "manifest", _symlinked_manifest, "points outside the manifest folder", None),
    ("mf-duplicate", "manifest", _duplicate_pod, "pod default/good", None),
    ("mf-unknown-fields", "manifest", _unknown_fields_manifest, "Running", None),
    (
        "mf-huge-count",
        "manifest",
        _greedy_manifest,
        f"UnexpectedAdmissionError: requested number of devices unavailable for {GOOD}",
        None,
    ),
    (
        "mf-huge-file",
        "manifest",
        _manifest("# " + "x" * (4 << 20) + "\n"),
        "larger than the 3 MiB limit of a manifest file",
        None,
    ),
    (
        "mf-huge-document",
        "manifest",
        _manifest(pod_manifest("big", {GOOD: 1}) + f"metadata2: '{'x' * (2 << 20)}'\n"),
        "a YAML document larger than the 1.5 MiB limit of one object",
        None,
    ),
    ("mf-fifo", "manifest", _special_file(os.mkfifo), "not a regular file (a FIFO)", None),
    ("mf-socket", "manifest", _special_file(_listening_socket), "not a regular file (a socket)", None),
    ("mf-alias-bomb", "manifest", _manifest(_ALIAS_BOMB), "document contains excessive aliasing", None),
    (
        "mf-deep-yaml",
        "manifest",
        _manifest("[" * 10_000 + "]" * 10_000 + "\n"),
        "nested deeper than 100 levels",
        None,
    ),
    (
        "mf-deep-json",
        "manifest",
        _manifest("[" * 10_000 + "]" * 10_000, "bad.json"),
        "nested deeper than 100 levels",
        None,
    ),
    (
        "mf-recursive-anchor",
        "manifest",
        _manifest(pod_manifest("loop", {GOOD: 1}) + "x: &x [1, *x]\n"),
        "a YAML anchor's value contains itself",
        None,
    ),
    # Names, quantities and text as the API server checks them (issue 35)
    (
        "mf-pod-name",
        "manifest",
        _manifest(pod_manifest("Bad_Name", {GOOD: 1})),
        "pod: metadata.name: 'Bad_Name' is not a DNS subdomain",
        None,
    ),
    (
        "mf-pod-name-type",
        "manifest",
        _manifest(pod_manifest("3.5", {GOOD: 1})),
        "pod: metadata.name: must be a string, not a float",
        None,
    ),
    (
        "mf-namespace",
        "manifest",
        _manifest(pod_manifest("ns", {GOOD: 1}, namespace="a.b")),
        "pod ns: metadata.namespace: 'a.b' is not a DNS label",
        None,
    ),
    (
        "mf-container-name",
        "manifest",
        _manifest(pod_manifest("cn", {GOOD: 1}).replace("- name: main", "- name: Main_1")),
        "pod default/cn: spec.containers[0].name: 'Main_1' is not a DNS label",
        None,
    ),
    (
        "mf-foreign-digit",
        "manifest",
        _manifest(pod_manifest("d", {GOOD: "'\u0661'"})),
        "limits of example.com/good: '\u0661' is not a quantity",
        None,
    ),
    (
        "mf-count-int64",
        "manifest",
        _manifest(pod_manifest("i", {GOOD: 2**64})),
        "limits of example.com/good: 18446744073709551616 is more than 9223372036854775807 devices",
        None,
    ),
    (
        "mf-limit-key",
        "manifest",
        _manifest(pod_manifest("k", {GOOD: 1, 7: 1})),
        "resources.limits: key 7 is not a string",
        None,
    ),
    (
        "mf-lone-surrogate",
        "manifest",
        _manifest(
            b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "s\\ud800"},'
            b' "spec": {"containers": [{"name": "main"}]}}',
            "bad.json",
        ),
        "metadata.name: 's\\ud800' is not valid UTF-8 (a lone surrogate)",
        None,
    ),
    # Checkpoint files (present when the daemon starts)
    (
        "cp-garbage",
        "checkpoint",
        _checkpoint_outcome,
        "invalid JSON at line 1, column 1",
        _checkpoint(_write(b"\x00garbage")),
    ),
    (
        "cp-empty",
        "checkpoint",
        _checkpoint_outcome,
        "invalid JSON: the file is empty",
        _checkpoint(_write(b"")),
    ),
    (
        "cp-truncated",
        "checkpoint",
        _checkpoint_outcome,
        "invalid JSON",
        _checkpoint(_write(_VALID[: len(_VALID) // 2])),
    ),
    (
        "cp-wrong-checksum",
        "checkpoint",
        _checkpoint_outcome,
        "checksum mismatch: file says 1",
        _checkpoint(_write(_WRONG_CHECKSUM)),
    ),
    (
        "cp-wrong-type",
        "checkpoint",
        _checkpoint_outcome,
        "DeviceIDs",
        _checkpoint(_write(_checkpoint_bytes(device_ids="good0"))),
    ),
    (
        "cp-non-utf8",
        "checkpoint",
        _checkpoint_outcome,
        "invalid UTF-8 at line 1",
        _checkpoint(_write(_VALID.replace(b"good0", b"go\xffd0"))),
    ),
    (
        "cp-huge",
        "checkpoint",
        _checkpoint_outcome,
        "over the 268435456-byte checkpoint limit",
        _checkpoint(_sparse_huge),
    ),
    ("cp-symlink", "checkpoint", _checkpoint_outcome, "invalid JSON", _checkpoint(_symlink_checkpoint)),
    ("cp-fifo", "checkpoint", _checkpoint_outcome, "not a regular file", _checkpoint(_fifo_checkpoint)),
    (
        "cp-directory",
        "checkpoint",
        _checkpoint_outcome,
        "not a regular file (a directory)",
        _checkpoint(_directory_checkpoint),
    ),
    ("cp-unknown-field", "checkpoint", _checkpoint_outcome, "no error", _checkpoint(_write(_UNKNOWN_FIELD))),
]


@pytest.mark.parametrize(
    ("where", "case", "expected", "prepare"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
async def test_bad_input_gets_a_clear_error_and_touches_nothing_else(
    node_factory: Callable[[Callable[[NodePaths], None] | None], Awaitable[Node]],
    where: str,
    case: Case,
    expected: str,
    prepare: Callable[[NodePaths], None] | None,
) -> None:
    node = await node_factory(prepare)
    seen = await case(node)
    assert expected in seen, f"{where}: {seen!r}"
    await assert_untouched(node)
    if where == "checkpoint" and expected != "no error":
        manager = node.daemon.manager
        assert manager is not None and manager.quarantined_checkpoint is not None
        assert manager.quarantined_checkpoint.name.startswith("kubelet_internal_checkpoint.corrupt-")


def test_the_catalogue_is_large_and_documented() -> None:
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids)) and len(ids) >= 40
    doc = (Path(__file__).resolve().parents[2] / "docs" / "bad-inputs.md").read_text()
    missing = [i for i in ids if f"`{i}`" not in doc]
    assert missing == [], f"cases missing from docs/bad-inputs.md: {missing}"
