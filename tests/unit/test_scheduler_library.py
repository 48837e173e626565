"""kubedevice.scheduler on its own: documents read from YAML text, the public face called, no daemon.

Only `kubedevice.scheduler`'s public names and the resource package's readers are used here; the package
must import nothing of the daemon and touch no file, socket or process while it allocates.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kubedevice.scheduler
from kubedevice.resource.document_file import load_documents
from kubedevice.resource.documents import DRADocument, read_document
from kubedevice.resource.slice_model import ResourceSliceDocument
from kubedevice.scheduler import (
    ADMIN_ACCESS_LABEL,
    AllocationRequest,
    CelSelectors,
    Unschedulable,
    allocate,
    gather_pools,
)

PACKAGE = Path(kubedevice.scheduler.__file__).parent
NODE = "node-1"

CLASSES = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: nic}
spec:
  selectors:
  - cel: {expression: 'device.driver == "nic.example.com"'}
"""


def slice_yaml(driver: str, devices: dict[str, int], node: str = NODE) -> str:
    """A v1 slice of `driver` on `node`: each device with its NUMA node, an attribute both drivers name
    alike (qualified, as a bare name would be in each driver's own domain)."""
    listed = "".join(
        f"  - name: {name}\n    attributes:\n      example.com/numa: {{int: {numa}}}\n"
        for name, numa in devices.items()
    )
    return (
        textwrap.dedent(f"""
        apiVersion: resource.k8s.io/v1
        kind: ResourceSlice
        metadata: {{name: {node}-{driver}}}
        spec:
          driver: {driver}
          nodeName: {node}
          pool: {{name: {node}, generation: 1, resourceSliceCount: 1}}
          devices:
        """)
        + listed
    )


GPUS = slice_yaml("gpu.example.com", {"gpu-0": 0, "gpu-1": 1})
NICS = slice_yaml("nic.example.com", {"nic-0": 0, "nic-1": 1})


@pytest.fixture(scope="module")
def cel() -> CelSelectors:
    return CelSelectors()


def read(cel: CelSelectors, *texts: str) -> list[DRADocument | ResourceSliceDocument]:
    text = "\n---\n".join(texts)
    return [read_document(d, "inputs.yaml", cel) for d in load_documents("inputs.yaml", text.encode())]


def found(cel: CelSelectors, *texts: str, in_use: tuple[tuple[str, str, str], ...] = ()) -> list[list[str]]:
    """Each claim's devices as `request -> pool/device`."""
    request = AllocationRequest.from_documents(read(cel, *texts), NODE, in_use)
    return [[f"{r.request} -> {r.pool}/{r.device}" for r in a.results] for a in allocate(request, cel)]


def unschedulable(cel: CelSelectors, *texts: str) -> str:
    request = AllocationRequest.from_documents(read(cel, *texts), NODE)
    with pytest.raises(Unschedulable) as caught:
        allocate(request, cel)
    return caught.value.message


def claim_yaml(name: str, requests: str, extra: str = "", namespace: str = "default") -> str:
    return (
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n"
        f"metadata: {{name: {name}, namespace: {namespace}}}\n"
        f"spec:\n  devices:\n    requests:\n{textwrap.indent(textwrap.dedent(requests), '    ')}{extra}"
    )


ONE_GPU = """
- name: gpu
  exactly: {deviceClassName: gpu}
"""


def test_a_claim_gets_the_first_free_device_in_published_order(cel: CelSelectors) -> None:
    assert found(cel, CLASSES, GPUS, claim_yaml("c", ONE_GPU)) == [["gpu -> node-1/gpu-0"]]
    in_use = (("gpu.example.com", NODE, "gpu-0"),)
    assert found(cel, CLASSES, GPUS, claim_yaml("c", ONE_GPU), in_use=in_use) == [["gpu -> node-1/gpu-1"]]


def test_the_allocation_is_the_v1_status_allocation_for_the_node(cel: CelSelectors) -> None:
    request = AllocationRequest.from_documents(read(cel, CLASSES, GPUS, claim_yaml("c", ONE_GPU)), NODE)
    [allocation] = allocate(request, cel)
    assert allocation.to_json()["devices"] == {
        "results": [{"request": "gpu", "driver": "gpu.example.com", "pool": NODE, "device": "gpu-0"}]
    }
    terms = allocation.to_json()["nodeSelector"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}]


def test_no_free_device_fails_with_the_schedulers_text(cel: CelSelectors) -> None:
    three = "- name: gpus\n  exactly: {deviceClassName: gpu, count: 3}\n"
    assert unschedulable(cel, CLASSES, GPUS, claim_yaml("c", three)) == (
        'cannot allocate all claims: ResourceClaim default/c, request "gpus": '
        "3 matching device(s) wanted, 2 free"
    )
    missing = "- name: gpu\n  exactly: {deviceClassName: fpga}\n"
    assert unschedulable(cel, CLASSES, GPUS, claim_yaml("c", missing)) == (
        "claim default/c, request gpu: could not retrieve device class fpga: "
        'deviceclass.resource.k8s.io "fpga" not found'
    )


def test_claims_of_one_request_are_allocated_together_or_not_at_all(cel: CelSelectors) -> None:
    assert found(cel, CLASSES, GPUS, claim_yaml("a", ONE_GPU), claim_yaml("b", ONE_GPU)) == [
        ["gpu -> node-1/gpu-0"],
        ["gpu -> node-1/gpu-1"],
    ]
    claims = [claim_yaml(name, ONE_GPU) for name in "abc"]
    assert unschedulable(cel, CLASSES, GPUS, *claims).startswith("cannot allocate all claims")


TWO_REQUESTS = """
- name: gpu
  exactly: {deviceClassName: gpu}
- name: nic
  exactly: {deviceClassName: nic}
"""
SAME_NUMA = """
    constraints:
    - matchAttribute: example.com/numa
"""


def test_a_match_attribute_constraint_pairs_devices_across_requests(cel: CelSelectors) -> None:
    claim = claim_yaml("pair", TWO_REQUESTS, SAME_NUMA)
    assert found(cel, CLASSES, GPUS, NICS, claim) == [["gpu -> node-1/gpu-0", "nic -> node-1/nic-0"]]
    # nic-0 is taken: the search gives gpu-0 back and takes the NUMA 1 pair.
    in_use = (("nic.example.com", NODE, "nic-0"),)
    assert found(cel, CLASSES, GPUS, NICS, claim, in_use=in_use) == [
        ["gpu -> node-1/gpu-1", "nic -> node-1/nic-1"]
    ]
    # Both NUMA nodes half taken: each request alone can be met, the pair cannot.
    in_use = (("nic.example.com", NODE, "nic-0"), ("gpu.example.com", NODE, "gpu-1"))
    request = AllocationRequest.from_documents(read(cel, CLASSES, GPUS, NICS, claim), NODE, in_use)
    with pytest.raises(Unschedulable, match="no combination of free devices satisfies every request"):
        allocate(request, cel)


ADMIN = "- name: gpu\n  exactly: {deviceClassName: gpu, adminAccess: true}\n"


def test_admin_access_needs_the_namespace_label(cel: CelSelectors) -> None:
    claim = claim_yaml("admin", ADMIN, namespace="ops")
    plain = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ops\n"
    for namespace in ((), (plain,)):
        assert unschedulable(cel, CLASSES, GPUS, claim, *namespace) == (
            "ResourceClaim ops/admin: spec.devices.requests[0].exactly.adminAccess: Forbidden: admin access "
            f"to devices requires the `{ADMIN_ACCESS_LABEL}: true` label on the containing namespace"
        )
    labelled = plain + f'  labels: {{{ADMIN_ACCESS_LABEL}: "true"}}\n'
    # Admin access may take a device in use.
    in_use = (("gpu.example.com", NODE, "gpu-0"),)
    assert found(cel, CLASSES, GPUS, claim, labelled, in_use=in_use) == [["gpu -> node-1/gpu-0"]]


def test_allocated_claims_hold_their_devices_and_templates_are_refused(cel: CelSelectors) -> None:
    allocated = claim_yaml("held", ONE_GPU) + textwrap.dedent("""
        status:
          allocation:
            devices:
              results:
              - {request: gpu, driver: gpu.example.com, pool: node-1, device: gpu-0}
        """)
    assert found(cel, CLASSES, GPUS, allocated, claim_yaml("new", ONE_GPU)) == [["gpu -> node-1/gpu-1"]]
    template = textwrap.dedent("""
        apiVersion: resource.k8s.io/v1
        kind: ResourceClaimTemplate
        metadata: {name: t}
        spec:
          spec:
            devices:
              requests:
              - name: gpu
                exactly: {deviceClassName: gpu}
        """)
    with pytest.raises(ValueError, match="ResourceClaimTemplate default/t: the scheduler allocates"):
        AllocationRequest.from_documents(read(cel, CLASSES, template), NODE)


def test_slices_of_another_node_are_not_this_nodes_pools(cel: CelSelectors) -> None:
    other = slice_yaml("gpu.example.com", {"gpu-9": 0}, node="node-2")
    slices = [d for d in read(cel, GPUS, other) if isinstance(d, ResourceSliceDocument)]
    scan = gather_pools(slices, NODE)
    assert [p.name for p in scan.pools] == [NODE]
    assert [s.meta.name for s in scan.ignored] == ["node-2-gpu.example.com"]
    assert unschedulable(cel, CLASSES, other, claim_yaml("c", ONE_GPU)).endswith(
        '"gpu": 1 matching device(s) wanted, 0 free'
    )


# --- no daemon, no I/O ------------------------------------------------------------------------------

#: Packages the library must never import: the daemon, the control-plane stand-in, the status API, and
#: the machinery of processes that serve.
FORBIDDEN = ("kubedevice.node", "kubedevice.controlplane", "kubedevice.statusapi", "asyncio", "grpc")


def test_the_package_imports_only_the_resource_objects_and_itself() -> None:
    for path in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                if name.startswith("kubedevice"):
                    assert name.startswith(("kubedevice.resource", "kubedevice.scheduler")), (path.name, name)
                assert not name.startswith(FORBIDDEN), (path.name, name)
                assert name.split(".")[0] not in ("os", "io", "pathlib", "shutil", "socket", "subprocess")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id != "open", f"{path.name}:{node.lineno} opens a file"


#: Imports the package, then, under an audit hook, reads the documents and allocates: prints the modules
#: loaded that the library must not load, and every file, socket or process event the allocation raised.
PROBE = """
import sys
from kubedevice.resource.documents import read_document
import kubedevice.scheduler as scheduler
import yaml

forbidden = sys.argv[1].split(",")
print(sorted(m for m in sys.modules if m.startswith(tuple(forbidden))))
docs = list(yaml.safe_load_all(sys.stdin.read()))
events = []
WATCHED = ("open", "os.", "socket.", "subprocess.", "shutil.")
sys.addaudithook(lambda event, args: events.append(event) if event.startswith(WATCHED) else None)
selectors = scheduler.CelSelectors()
read = [read_document(d, "inputs.yaml", selectors) for d in docs]
allocation = scheduler.allocate(scheduler.AllocationRequest.from_documents(read, "node-1"), selectors)
taken = [("gpu.example.com", "node-1", "gpu-0"), ("gpu.example.com", "node-1", "gpu-1")]
try:
    scheduler.allocate(scheduler.AllocationRequest.from_documents(read, "node-1", taken), selectors)
except scheduler.Unschedulable as err:
    print(err.message.split(":")[0])
print(sorted(set(events)))
print([r.device for a in allocation for r in a.results])
"""


def test_allocating_touches_no_file_and_loads_nothing_of_the_daemon() -> None:
    inputs = "\n---\n".join((CLASSES, GPUS, NICS, claim_yaml("pair", TWO_REQUESTS, SAME_NUMA)))
    out = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(FORBIDDEN)],
        input=inputs,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.splitlines() == [
        "[]",
        "cannot allocate all claims",
        "[]",
        "['gpu-0', 'nic-0']",
    ], out.stdout + out.stderr
