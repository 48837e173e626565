"""What scripts read of `/pods` and `/claims`: a pod's DRA status in core/v1's shape and omission rules
(`status.resourceClaimStatuses`, `status.extendedResourceClaimStatus`), and a claim's `preparedState` in
the words of the claims table."""

from __future__ import annotations

from kubedevice.controlplane.extended import ExtendedRoutes
from kubedevice.dra.types import ExtendedResourceClaimStatus, RequestMapping
from kubedevice.node.claim_views import pod_status_view
from kubedevice.node.manifests import parse_manifest
from kubedevice.node.pods import PodRecord
from kubedevice.statusapi import contract

POD = b"""apiVersion: v1
kind: Pod
metadata: {name: p, uid: 0b7e6a52-0000-4000-8000-00000000000p}
spec:
  resourceClaims:
  - {name: named, resourceClaimName: shared}
  - {name: made, resourceClaimTemplateName: gpu-tmpl}
  - {name: unneeded, resourceClaimTemplateName: gpu-tmpl}
  - {name: waiting, resourceClaimTemplateName: gpu-tmpl}
  containers:
  - name: main
    resources:
      claims: [{name: named}, {name: made}]
      limits: {example.com/gpu: 1}
"""
PLAIN = b"apiVersion: v1\nkind: Pod\nmetadata: {name: q}\nspec: {containers: [{name: main}]}\n"


def _record(content: bytes) -> PodRecord:
    (manifest,) = parse_manifest("p.yaml", content)
    return PodRecord(manifest)


def test_claim_statuses_name_only_the_template_claims_made_and_leave_out_a_null_name() -> None:
    record = _record(POD)
    # No control plane answer yet: the API server shows no status entry either.
    assert pod_status_view(record) == {}
    record.dra_pod = record.manifest.dra_pod({"made": "p-made-x7k2q", "unneeded": None})
    assert pod_status_view(record) == {
        "resourceClaimStatuses": [
            {"name": "made", "resourceClaimName": "p-made-x7k2q"},
            {"name": "unneeded"},
        ]
    }


def test_the_extended_resource_claim_status_is_the_apis_object() -> None:
    record = _record(POD)
    record.routes = ExtendedRoutes({"example.com/gpu": "gpu"})
    special = ExtendedResourceClaimStatus(
        "p-extended-resources-abcde", (RequestMapping("main", "example.com/gpu", "container-0-request-0"),)
    )
    record.dra_pod = record.manifest.dra_pod({"made": "p-made-x7k2q"}, special)
    assert pod_status_view(record) == {
        "resourceClaimStatuses": [{"name": "made", "resourceClaimName": "p-made-x7k2q"}],
        "extendedResourceClaimStatus": {
            "resourceClaimName": "p-extended-resources-abcde",
            "requestMappings": [
                {
                    "containerName": "main",
                    "resourceName": "example.com/gpu",
                    "requestName": "container-0-request-0",
                }
            ],
        },
    }


def test_a_pod_without_claims_has_an_empty_status() -> None:
    assert pod_status_view(_record(PLAIN)) == {}


def test_prepared_state_is_the_tables_word() -> None:
    assert [
        contract.prepared_state(prepared, cached)
        for prepared, cached in [(True, True), (False, True), (False, False)]
    ] == [
        "yes",
        "restored",
        "no",
    ]
