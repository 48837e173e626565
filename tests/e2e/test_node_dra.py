"""DRA in the node daemon, with real processes: the daemon, `kubedevice plugin fake --api dra` and, for
a pod using both paths, a device plugin. Claims carry user-written allocations."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator

import grpc.aio
import pytest

from kubedevice.api.podresources.v1 import api_pb2 as pr
from kubedevice.api.podresources.v1 import api_pb2_grpc as pr_grpc
from tests.node_dra_helpers import (
    DRIVER,
    GPU_CLASS,
    DRANodeProcesses,
    claim_yaml,
    dra_node_processes,
    pod_yaml,
)
from tests.node_helpers import run_cli, wait_for

P = "0b7e6a52-0000-4000-8000-00000000000p"
A = "0b7e6a52-0000-4000-8000-00000000000a"
B = "0b7e6a52-0000-4000-8000-00000000000b"
U1 = "c1c1c1c1-0000-4000-8000-000000000001"
BAD_CEL = '{deviceClassName: gpu, selectors: [{cel: {expression: "device.driver =="}}]}'


@pytest.fixture
def node() -> Iterator[DRANodeProcesses]:
    yield from dra_node_processes()


def _list_pod_resources(node: DRANodeProcesses) -> list[pr.PodResources]:
    async def call() -> list[pr.PodResources]:
        async with grpc.aio.insecure_channel(f"unix://{node.paths.pod_resources_socket}") as channel:
            stub = pr_grpc.PodResourcesListerStub(channel)
            return list((await stub.List(pr.ListPodResourcesRequest(), timeout=5)).pod_resources)

    return asyncio.run(call())


def test_happy_path_with_a_device_plugin_resource_too(node: DRANodeProcesses) -> None:
    """Scenario 5, in a pod that also holds a device-plugin device: one prepare call, Running, the DRA CDI
    ID first, the checkpoint entry, PodResources' dynamic_resources, the claim as the SDK fetches it."""
    node.start_daemon()
    node.start_plugin("example.com/gpu", 2, "--cdi", "--cdi-spec-dir", str(node.root / "cdi-dp"))
    node.wait_capacity("example.com/gpu", 2)
    node.start_dra_plugin()
    node.write_manifest("claims.yaml", claim_yaml("c1", uid=U1))
    node.write_manifest("p.yaml", pod_yaml("p", "c1", uid=P, limits={"example.com/gpu": 1}))
    pod = node.wait_phase("p", "Running")

    assert [e["uid"] for e in node.events("prepare")] == [U1]
    main = pod["containers"][0]
    dp_device = main["devices"]["example.com/gpu"][0]
    assert main["cdiDevices"] == [f"{DRIVER}/gpu=gpu-0", f"example.com/gpu={dp_device}"]
    assert main["claims"] == [
        {
            "claim": "default/c1",
            "devices": [{"driver": DRIVER, "pool": "node-1", "device": "gpu-0"}],
            "cdiDevices": [f"{DRIVER}/gpu=gpu-0"],
        }
    ]
    assert pod["resourceClaims"][0] | {"preparedThisRun": None} == {
        "name": "c1",
        "resourceClaimName": "c1",
        "resourceClaimTemplateName": None,
        "uid": U1,
        "prepared": True,
        "preparedThisRun": None,
    }
    # As the API serves the pod: a claim named in the spec has no status entry.
    assert pod["status"] == {}
    assert node.checkpoint_claims() == {"default/c1": ({P}, [f"{DRIVER}/node-1/gpu-0"])}
    data = json.loads(json.loads((node.root / "dra_manager_state").read_text())["Data"])
    device = data["ClaimInfoStateList"][0]["DriverState"][DRIVER]["Devices"][0]
    assert device == {
        "PoolName": "node-1",
        "DeviceName": "gpu-0",
        "ShareID": None,
        "RequestNames": ["gpu"],
        "CDIDeviceIDs": [f"{DRIVER}/gpu=gpu-0"],
    }

    (listed,) = _list_pod_resources(node)
    (container,) = listed.containers
    assert [d.resource_name for d in container.devices] == ["example.com/gpu"]
    (dynamic,) = container.dynamic_resources
    assert (dynamic.claim_name, dynamic.claim_namespace) == ("c1", "default")
    (resource,) = dynamic.claim_resources
    assert (resource.driver_name, resource.pool_name, resource.device_name) == (DRIVER, "node-1", "gpu-0")
    assert [c.name for c in resource.cdi_devices] == [f"{DRIVER}/gpu=gpu-0"]
    table = run_cli("podresources", "list", "--socket", str(node.paths.pod_resources_socket))
    assert table.returncode == 0, table.stderr
    assert f"claim default/c1 ({DRIVER})" in table.stdout and "node-1/gpu-0" in table.stdout

    claim = node.try_status("/claims/default/c1")
    assert claim["metadata"] == {"name": "c1", "namespace": "default", "uid": U1}
    assert claim["status"]["allocation"]["devices"]["results"] == [
        {"request": "gpu", "driver": DRIVER, "pool": "node-1", "device": "gpu-0"}
    ]
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": P}]
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "gpu"
    listed_claim = node.claim("c1")
    assert listed_claim is not None
    assert (listed_claim["prepared"], listed_claim["reservedBy"]) == (True, "daemon")
    assert listed_claim["pods"] == [{"uid": P, "pod": "default/p"}]
    assert node.node()["nodeName"] == "node-1"
    slices = node.try_status("/resourceslices")["resourceSlices"]
    assert [(s["driver"], [d["name"] for d in s["devices"]], s["error"]) for s in slices] == [
        (DRIVER, ["gpu-0", "gpu-1"], None)
    ]


def test_shared_claim_prepared_once_and_unprepared_by_the_last_pod(node: DRANodeProcesses) -> None:
    """Scenario 7."""
    node.start_daemon()
    node.start_dra_plugin()
    node.write_manifest("claims.yaml", claim_yaml("c1", uid=U1))
    node.write_manifest("a.yaml", pod_yaml("a", "c1", uid=A))
    node.wait_phase("a", "Running")
    node.write_manifest("b.yaml", pod_yaml("b", "c1", uid=B))
    node.wait_phase("b", "Running")
    assert len(node.events("prepare")) == 1
    assert node.checkpoint_claims()["default/c1"][0] == {A, B}
    assert {r["uid"] for r in node.try_status("/claims/default/c1")["status"]["reservedFor"]} == {A, B}

    (node.paths.manifests / "a.yaml").unlink()
    node.wait_gone("a")
    assert node.checkpoint_claims()["default/c1"][0] == {B}
    assert node.events("unprepare") == []
    (node.paths.manifests / "b.yaml").unlink()
    node.wait_gone("b")
    assert [e["uid"] for e in node.events("unprepare")] == [U1]
    assert node.checkpoint_claims() == {}
    assert "reservedFor" not in node.try_status("/claims/default/c1")["status"]


def test_pods_wait_pending_with_the_kubelets_texts_and_retry(node: DRANodeProcesses) -> None:
    """Scenarios 11, 12, 14 and a missing claim: Pending, FailedPrepareDynamicResources, nothing
    recorded; a fixed claim is prepared at the next scan; a pod whose driver never registered goes at once."""
    node.start_daemon()
    node.start_dra_plugin()
    node.write_manifest(
        "claims.yaml",
        "---\n".join(
            [
                claim_yaml("other", driver="other.example.com"),
                claim_yaml("theirs", reserved_for=[("q", "q-uid")], uid=U1),
                claim_yaml("bare", None),
            ]
        ),
    )
    prefix = "Failed to prepare dynamic resources: prepare dynamic resources: "
    expected = {
        "o": "DRA driver other.example.com is not registered",
        "t": f"pod t ({A}) is not allowed to use ResourceClaim theirs ({U1})",
        "n": (
            "claim default/bare, request gpu: could not retrieve device class gpu: "
            'deviceclass.resource.k8s.io "gpu" not found'
        ),
        "m": 'fetch ResourceClaim missing: resourceclaims.resource.k8s.io "missing" not found',
    }
    claims = {"o": "other", "t": "theirs", "n": "bare", "m": "missing"}
    for name, claim in claims.items():
        node.write_manifest(f"{name}.yaml", pod_yaml(name, claim, uid=A if name == "t" else None))
    for name, text in expected.items():
        pod = node.wait_message(name, text)
        if name == "n":  # no allocation in the document: the daemon's allocator, as a scheduler
            assert (pod["phase"], pod["reason"], pod["message"]) == ("Pending", "Unschedulable", text)
            continue
        assert (pod["phase"], pod["reason"], pod["message"]) == (
            "Pending",
            "FailedPrepareDynamicResources",
            prefix + text,
        )
    assert node.checkpoint_claims() == {}
    assert node.events("prepare") == []
    # Selectors are compiled as the manifests are read: a claim that cannot compile refuses its file.
    node.write_manifest("bad-cel.yaml", claim_yaml("cel").replace("{deviceClassName: gpu}", BAD_CEL))
    error = wait_for(lambda: node.manifest_errors().get("bad-cel.yaml"), "the bad selector to be reported")
    assert error.startswith(
        "ResourceClaim default/cel: spec.devices.requests[0].exactly.selectors[0].cel.expression: "
        "CEL compile error: "
    )

    # The driver never registered: the pod goes at once, nothing to unprepare.
    (node.paths.manifests / "o.yaml").unlink()
    node.wait_gone("o")
    # A DeviceClass for the claim: the daemon allocates it from the driver's slice and prepares it.
    node.write_manifest("class.yaml", GPU_CLASS)
    node.wait_phase("n", "Running")
    assert node.pod("n")["reason"] == ""
    assert [e["claim"] for e in node.events("prepare")] == ["default/bare"]
    bare = node.claim("bare")
    assert bare is not None and bare["allocatedBy"] == "daemon" and bare["reservedBy"] == "daemon"
    # gpu-0 is held by `theirs`, whose document allocates it: the allocator takes gpu-1.
    assert [r["device"] for r in bare["allocation"]["devices"]["results"]] == ["gpu-1"]
    # Its pod gone, the daemon's allocation goes too (the device is free again).
    (node.paths.manifests / "n.yaml").unlink()
    node.wait_gone("n")
    wait_for(lambda: (node.claim("bare") or {}).get("allocation", 1) is None, "bare to be deallocated")


def test_restart_keeps_claims_without_a_prepare_and_a_reboot_prepares_again(node: DRANodeProcesses) -> None:
    """Scenario 19: a plain restart calls nothing; a new pod of the restored claim makes one call; after a
    reboot (another boot ID) the pods are prepared again, each claim's devices listed once."""
    node.start_daemon("--boot-id", "boot-1")
    node.start_dra_plugin()
    node.write_manifest("claims.yaml", claim_yaml("c1", uid=U1))
    node.write_manifest("p.yaml", pod_yaml("p", "c1", uid=P))
    before = node.wait_phase("p", "Running")["containers"][0]["cdiDevices"]
    # Its claim's checkpoint entry shows it ran (listed, with devices): the pod state file need not.
    assert P not in json.loads(node.paths.state_file.read_text())["pods"]
    assert node.kill_daemon(signal.SIGKILL) == -signal.SIGKILL  # nothing written at a stop
    node.start_daemon("--boot-id", "boot-1")
    after = node.wait_phase("p", "Running")
    assert after["containers"][0]["cdiDevices"] == before == [f"{DRIVER}/gpu=gpu-0"]
    wait_for(node.driver_devices, "the plugin to register with the new daemon")
    assert len(node.events("prepare")) == 1 and node.events("prepare-cached") == []

    node.write_manifest("q.yaml", pod_yaml("q", "c1", uid=B))
    node.wait_phase("q", "Running")
    calls = node.events("prepare") + node.events("prepare-cached")
    assert [c["uid"] for c in calls] == [U1, U1]
    assert node.checkpoint_claims() == {"default/c1": ({P, B}, [f"{DRIVER}/node-1/gpu-0"])}

    assert node.kill_daemon(2) == 0
    node.start_daemon("--boot-id", "boot-2")
    wait_for(node.driver_devices, "the plugin to register after the reboot")
    node.wait_phase("p", "Running")
    node.wait_phase("q", "Running")
    wait_for(lambda: len(node.events("prepare-cached")) >= 2, "the claim to be prepared again")
    assert node.checkpoint_claims() == {"default/c1": ({P, B}, [f"{DRIVER}/node-1/gpu-0"])}


def test_a_normal_restart_logs_no_warning(node: DRANodeProcesses) -> None:
    """A daemon stopped and started again, with a device plugin, a DRA driver and their pods running: every
    event is routine (INFO), and a driver's first connection to a daemon says it is usable, not "again"."""
    node.start_daemon()
    node.start_plugin("example.com/gpu", 2)
    node.wait_capacity("example.com/gpu", 2)
    node.start_dra_plugin()
    node.write_manifest("claims.yaml", claim_yaml("c1", uid=U1))
    node.write_manifest("p.yaml", pod_yaml("p", "c1", uid=P, limits={"example.com/gpu": 1}))
    node.wait_phase("p", "Running")

    assert node.kill_daemon(signal.SIGTERM) == 0
    node.start_daemon()
    node.wait_phase("p", "Running")
    node.wait_capacity("example.com/gpu", 2, 2)
    wait_for(lambda: any(e["connected"] for e in node.endpoints()), "the driver to register again")
    # The driver publishes its slice file again after the daemon's start removed it.
    wait_for(node.driver_devices, "the driver's devices to be published again")
    node.write_manifest("q.yaml", pod_yaml("q", "c1", uid=B))  # a call to the driver after the restart
    node.wait_phase("q", "Running")

    # Whole logs (node.log keeps only their ends).
    logs = {
        name: (node.root / f"{file}.log").read_text()
        for name, file in (
            ("daemon", "daemon"),
            ("driver", f"dra-{DRIVER}"),
            ("plugin", "plugin-example.com_gpu"),
        )
    }
    daemon = logs["daemon"]
    warned = {
        name: [line for line in text.splitlines() if " WARNING " in line or " ERROR " in line]
        for name, text in logs.items()
    }
    assert warned == {"daemon": [], "driver": [], "plugin": []}
    assert daemon.count(f"INFO kubedevice.dra.plugins: DRA driver {DRIVER} is usable\n") == 2, daemon
    assert "usable again" not in daemon
    assert "was removed (a node daemon starting clears the folder): writing it again" in logs["driver"]


def test_terminating_until_the_driver_is_back(node: DRANodeProcesses) -> None:
    """Scenario 43."""
    node.start_daemon()
    node.start_dra_plugin()
    node.write_manifest("claims.yaml", claim_yaml("c1", uid=U1))
    node.write_manifest("p.yaml", pod_yaml("p", "c1", uid=P))
    node.wait_phase("p", "Running")
    node.stop_dra_plugin()
    (node.paths.manifests / "p.yaml").unlink()
    pod = node.wait_message("p", "unprepare dynamic resources")
    assert (pod["phase"], pod["terminating"], pod["reason"], pod["message"]) == (
        "Running",
        True,
        "FailedUnprepareDynamicResources",
        f"unprepare dynamic resources: DRA driver {DRIVER} is not registered",
    )
    assert _list_pod_resources(node) == []
    assert node.checkpoint_claims() == {"default/c1": ({P}, [f"{DRIVER}/node-1/gpu-0"])}

    # The manifest back while the pod terminates: admitted anew once the termination ends.
    node.write_manifest("p.yaml", pod_yaml("p", "c1", uid=P))
    assert node.wait_message("p", "unprepare dynamic resources")["terminating"]

    node.start_dra_plugin()
    wait_for(lambda: node.events("unprepare"), "the claim to be unprepared")
    assert [e["uid"] for e in node.events("unprepare")] == [U1]
    wait_for(lambda: (node.pod("p") or {}).get("terminating") is False, "p admitted anew")
    node.wait_phase("p", "Running")
    wait_for(lambda: len(node.events("prepare") + node.events("prepare-cached")) == 2, "a second prepare")
    assert node.checkpoint_claims() == {"default/c1": ({P}, [f"{DRIVER}/node-1/gpu-0"])}
    (node.paths.manifests / "p.yaml").unlink()
    node.wait_gone("p")
    assert node.checkpoint_claims() == {}


def test_claims_of_pods_removed_while_the_daemon_was_down_are_unprepared_after_the_first_scan(
    node: DRANodeProcesses,
) -> None:
    """Scenario 20."""
    node.start_daemon()
    node.start_dra_plugin()
    node.write_manifest("claims.yaml", claim_yaml("c1", uid=U1))
    node.write_manifest("p.yaml", pod_yaml("p", "c1", uid=P))
    node.wait_phase("p", "Running")
    assert node.kill_daemon(2) == 0
    (node.paths.manifests / "p.yaml").unlink()
    node.start_daemon()
    wait_for(lambda: node.events("unprepare"), "the reconcile pass to unprepare c1")
    assert [e["uid"] for e in node.events("unprepare")] == [U1]
    wait_for(lambda: node.checkpoint_claims() == {}, "an empty checkpoint")
    # The control plane drops what the gone pod held once the reconcile pass has returned, after its write.
    wait_for(
        lambda: "reservedFor" not in node.try_status("/claims/default/c1")["status"],
        "the gone pod's reservation of c1 to be dropped",
    )


C4_BAD = (
    '{"Data":"{\\"kind\\":\\"DRACheckpoint\\",\\"apiVersion\\":\\"checkpoint.dra.kubelet.k8s.io/v1\\",'
    '\\"ClaimInfoStateList\\":[{\\"ClaimUID\\":\\"067798be-454e-4be4-9047-1aa06aea63f7\\",\\"ClaimName\\":'
    '\\"example-1\\",\\"Namespace\\":\\"default\\",\\"PodUIDs\\":{\\"139cdb46-f989-4f17-9561-ca10cfb509a6\\"'
    ':{}},\\"DriverState\\":{\\"test-driver.cdi.k8s.io\\":{\\"Devices\\":[{\\"PoolName\\":\\"worker-1\\",'
    '\\"DeviceName\\":\\"dev-1\\",\\"RequestNames\\":[\\"test request\\"],\\"CDIDeviceIDs\\":'
    '[\\"example.com/example=cdi-example\\"]}]}}}]}","Checksum":1}'
)


def test_corrupt_checkpoint_refused_then_moved_aside(node: DRANodeProcesses) -> None:
    """Scenarios 22 and 32."""
    from tests.node_helpers import run_cli

    node.root.mkdir(parents=True, exist_ok=True)
    path = node.root / "dra_manager_state"
    path.write_text(C4_BAD)
    refused = run_cli("node", "--root-dir", str(node.root), "--node-name", "node-1")
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"error: node: {path}: create ResourceClaim cache: GetOrCreate() on checkpoint state: failed to "
        "get checkpoint dra_manager_state: checkpoint is corrupted — drain the node and remove the file, "
        "or start again with --dra-state-recovery move-aside"
    ]
    assert path.read_text() == C4_BAD
    assert not node.paths.kubelet_socket.exists()

    node.start_daemon("--dra-state-recovery", "move-aside")
    (moved,) = [p for p in node.root.iterdir() if p.name.startswith("dra_manager_state.corrupt-")]
    assert moved.read_text() == C4_BAD
    assert node.checkpoint_claims() == {}
    log = node.log("daemon")
    assert (
        f"WARNING kubedevice.node.daemon: moved the unreadable DRA checkpoint {path} aside to {moved}: "
        "claims prepared before are forgotten and driver state they hold may leak"
    ) in log
    node.start_dra_plugin()
    node.write_manifest("claims.yaml", claim_yaml("c1", uid=U1))
    node.write_manifest("p.yaml", pod_yaml("p", "c1", uid=P))
    node.wait_phase("p", "Running")
    assert [e["uid"] for e in node.events("prepare")] == [U1]


TEMPLATE = """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: gpu-tmpl}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu}
"""
TEMPLATE_POD = """apiVersion: v1
kind: Pod
metadata: {name: t, uid: 0b7e6a52-0000-4000-8000-00000000000t}
spec:
  resourceClaims:
  - {name: gpu, resourceClaimTemplateName: gpu-tmpl}
  containers:
  - name: main
    resources:
      claims: [{name: gpu}]
"""


def test_a_template_claim_is_generated_allocated_prepared_and_deleted_with_its_pod(
    node: DRANodeProcesses,
) -> None:
    """Scenario 15, with the daemon's allocator."""
    node.start_daemon()
    node.start_dra_plugin()
    node.write_manifest("t.yaml", TEMPLATE_POD)
    assert node.wait_message("t", 'pod "default/t": ResourceClaim not created yet')["status"] == {}
    node.write_manifest("class.yaml", GPU_CLASS + "---\n" + TEMPLATE)
    pod = node.wait_phase("t", "Running")
    (claim,) = pod["resourceClaims"]
    generated = claim["resourceClaimName"]
    # The same claim as a DRA user's script reads it from the API server's pod.
    assert pod["status"] == {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": generated}]}
    assert generated.startswith("t-gpu-") and len(generated) == len("t-gpu-") + 5
    assert pod["containers"][0]["cdiDevices"] == [f"{DRIVER}/gpu=gpu-0"]
    assert pod["uid"] not in json.loads(node.paths.state_file.read_text())["pods"]
    as_json = node.try_status(f"/claims/default/{generated}")
    (owner,) = as_json["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("Pod", "t", pod["uid"], True)
    # A restart keeps the generated claim (same name) and the pod's devices, with no prepare call.
    assert node.kill_daemon(2) == 0
    node.start_daemon()
    again = node.wait_phase("t", "Running")
    assert again["resourceClaims"][0]["resourceClaimName"] == generated
    assert again["containers"][0]["cdiDevices"] == [f"{DRIVER}/gpu=gpu-0"]
    assert len(node.events("prepare")) == 1 and node.events("prepare-cached") == []
    wait_for(node.driver_devices, "the plugin to register with the new daemon")
    (node.paths.manifests / "t.yaml").unlink()
    node.wait_gone("t")
    wait_for(lambda: node.claim(generated) is None, "the generated claim to be deleted")
    assert [e["claim"] for e in node.events("unprepare")] == [f"default/{generated}"]
