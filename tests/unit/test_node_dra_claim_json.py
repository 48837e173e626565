"""A claim in the v1 shape the SDK's standalone backend reads: a document read from a real manifest folder,
the daemon's reservation filled in by the claim view, and the SDK's own reading of the JSON."""

from __future__ import annotations

from pathlib import Path

from kubedevice.controlplane.claim_store import ClaimRecord, ClaimStore
from kubedevice.controlplane.claim_view import ClaimView
from kubedevice.dra import ClaimNotFoundError
from kubedevice.node.manifest_folder import ManifestFolder
from kubedevice.plugin.dra.model import claim_from_json
from kubedevice.resource.claim_json import claim_json
from kubedevice.resource.model import ConsumerReference

CONFIGURED = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: cfg, namespace: ml, uid: u-cfg, labels: {team: a}}
spec:
  devices:
    requests:
    - name: ts
      exactly: {deviceClassName: gpu, selectors: [{cel: {expression: "device.driver == 'gpu.example.com'"}}]}
    - name: any
      firstAvailable:
      - {name: big, deviceClassName: gpu, count: 2}
      - {name: all, deviceClassName: gpu, allocationMode: All}
    constraints:
    - {requests: [ts, any], matchAttribute: gpu.example.com/numaNode}
    config:
    - requests: [ts]
      opaque: {driver: gpu.example.com, parameters: {sharing: TimeSlicing}}
status:
  allocation:
    devices:
      results:
      - {request: ts, driver: gpu.example.com, pool: node-1, device: gpu-0}
      - {request: any/big, driver: gpu.example.com, pool: node-1, device: gpu-1, adminAccess: false}
      config:
      - source: FromClaim
        requests: [ts]
        opaque: {driver: gpu.example.com, parameters: {sharing: TimeSlicing}}
"""


async def test_the_claim_in_the_v1_shape_as_the_sdk_reads_it(tmp_path: Path) -> None:
    (tmp_path / "claims.yaml").write_text(CONFIGURED)
    documents = ManifestFolder(tmp_path).scan().dra
    state = ClaimStore(
        {"ml/cfg": ClaimRecord(uid="u-cfg", reserved_for=(ConsumerReference("pods", "p", "P"),))}
    )
    view = ClaimView(lambda: documents, state)
    claim = view.claim("ml", "cfg")
    assert claim is not None and view.claim("ml", "other") is None
    as_json = claim_json(claim)
    assert as_json["apiVersion"] == "resource.k8s.io/v1" and as_json["kind"] == "ResourceClaim"
    assert as_json["metadata"] == {"name": "cfg", "namespace": "ml", "uid": "u-cfg", "labels": {"team": "a"}}
    assert as_json["spec"] == {
        "devices": {
            "requests": [
                {
                    "name": "ts",
                    "exactly": {
                        "deviceClassName": "gpu",
                        "selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}],
                        "allocationMode": "ExactCount",
                        "count": 1,
                    },
                },
                {
                    "name": "any",
                    "firstAvailable": [
                        {"name": "big", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2},
                        {"name": "all", "deviceClassName": "gpu", "allocationMode": "All"},
                    ],
                },
            ],
            "constraints": [{"requests": ["ts", "any"], "matchAttribute": "gpu.example.com/numaNode"}],
            "config": [
                {
                    "requests": ["ts"],
                    "opaque": {"driver": "gpu.example.com", "parameters": {"sharing": "TimeSlicing"}},
                }
            ],
        }
    }
    assert as_json["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "P"}]
    seen = claim_from_json(as_json, "gpu.example.com", {"gpu-0": "fake-0", "gpu-1": "fake-1"})
    assert (seen.uid, seen.namespace, seen.name) == ("u-cfg", "ml", "cfg")
    assert [(r.request, r.device, r.device_id) for r in seen.results] == [
        ("ts", "gpu-0", "fake-0"),
        ("any/big", "gpu-1", "fake-1"),
    ]
    assert [dict(c) for c in seen.config] == [
        {
            "source": "FromClaim",
            "requests": ["ts"],
            "opaque": {"driver": "gpu.example.com", "parameters": {"sharing": "TimeSlicing"}},
        }
    ]
    resource_claim = await view.get_claim("ml", "cfg")
    assert [r.uid for r in resource_claim.reserved_for] == ["P"]
    try:
        await view.get_claim("ml", "missing")
    except ClaimNotFoundError as err:
        assert str(err) == 'resourceclaims.resource.k8s.io "missing" not found'
    else:
        raise AssertionError("a missing claim was found")
