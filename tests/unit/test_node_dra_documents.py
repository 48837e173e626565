"""DRA documents in the manifest folder: every version read alike, the kind texts, identity, files."""

import hashlib
import json

import pytest
import yaml

from kubedevice.dra import types as dra
from kubedevice.node.manifests import parse_file
from kubedevice.resource.document_file import ManifestError
from kubedevice.resource.identity import canonical_json, document_uid
from kubedevice.resource.model import (
    AllocationResult,
    ClaimDocument,
    ClaimTemplateDocument,
    DeviceClaimConfiguration,
    DeviceClassDocument,
    DeviceConstraint,
    DeviceRequest,
    DeviceSubRequest,
    ExactDeviceRequest,
    NamespaceDocument,
    OpaqueConfig,
)
from tests.dra_document_helpers import NoDoubleBang
from tests.dra_document_helpers import claim_text as _claim
from tests.dra_document_helpers import one as _one

V1_CLAIM = """\
apiVersion: resource.k8s.io/{version}
kind: ResourceClaim
metadata: {{name: c1, namespace: ml, labels: {{a: b}}}}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.example.com
        selectors: [{{cel: {{expression: "device.driver == 'gpu.example.com'"}}}}]
        count: 2
    - name: nic
      firstAvailable:
      - {{name: fast, deviceClassName: nic, allocationMode: All}}
      - {{name: slow, deviceClassName: nic, selectors: [{{cel: {{expression: "true"}}}}]}}
    constraints:
    - {{requests: [gpu, nic/fast], matchAttribute: gpu.example.com/numaNode}}
    config:
    - {{requests: [gpu], opaque: {{driver: gpu.example.com, parameters: {{sharing: TimeSlicing}}}}}}
"""

V1BETA1_CLAIM = """\
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata: {name: c1, namespace: ml, labels: {a: b}}
spec:
  devices:
    requests:
    - name: gpu
      deviceClassName: gpu.example.com
      selectors: [{cel: {expression: "device.driver == 'gpu.example.com'"}}]
      count: 2
    - name: nic
      firstAvailable:
      - {name: fast, deviceClassName: nic, allocationMode: All}
      - {name: slow, deviceClassName: nic, selectors: [{cel: {expression: "true"}}]}
    constraints:
    - {requests: [gpu, nic/fast], matchAttribute: gpu.example.com/numaNode}
    config:
    - {requests: [gpu], opaque: {driver: gpu.example.com, parameters: {sharing: TimeSlicing}}}
"""


def test_a_v1_claim_reads_into_the_model() -> None:
    compiler = NoDoubleBang()
    claim = _one(V1_CLAIM.format(version="v1"), compiler)
    assert isinstance(claim, ClaimDocument)
    assert (claim.meta.namespace, claim.meta.name, claim.meta.source, claim.meta.labels) == (
        "ml",
        "c1",
        "f.yaml",
        {"a": "b"},
    )
    assert claim.spec.requests == (
        DeviceRequest(
            "gpu",
            exactly=ExactDeviceRequest("gpu.example.com", ("device.driver == 'gpu.example.com'",), count=2),
        ),
        DeviceRequest(
            "nic",
            first_available=(
                DeviceSubRequest("fast", "nic", allocation_mode="All", count=0),
                DeviceSubRequest("slow", "nic", selectors=("true",)),
            ),
        ),
    )
    assert claim.spec.constraints == (
        DeviceConstraint(("gpu", "nic/fast"), "gpu.example.com/numaNode", None),
    )
    assert claim.spec.config == (
        DeviceClaimConfiguration(("gpu",), OpaqueConfig("gpu.example.com", {"sharing": "TimeSlicing"})),
    )
    assert claim.allocation is None and claim.reserved_for is None
    assert claim.spec.request("nic/slow") is claim.spec.requests[1]
    assert compiler.seen == ["device.driver == 'gpu.example.com'", "true"]


def test_every_version_gives_the_same_claim() -> None:
    v1 = _one(V1_CLAIM.format(version="v1"))
    v1beta2 = _one(V1_CLAIM.format(version="v1beta2"))
    v1beta1 = _one(V1BETA1_CLAIM)
    assert isinstance(v1, ClaimDocument) and isinstance(v1beta2, ClaimDocument)
    assert isinstance(v1beta1, ClaimDocument)
    assert v1.spec == v1beta2.spec == v1beta1.spec
    flat_admin = V1BETA1_CLAIM.replace("      count: 2\n", "      count: 2\n      adminAccess: true\n")
    admin = _one(flat_admin)
    assert isinstance(admin, ClaimDocument)
    exactly = admin.spec.requests[0].exactly
    assert exactly is not None and exactly.admin_access


def test_templates_classes_and_namespaces_in_every_version() -> None:
    for version in ("v1", "v1beta2", "v1beta1"):
        request = (
            "{name: gpu, deviceClassName: gpu}"
            if version == "v1beta1"
            else "{name: gpu, exactly: {deviceClassName: gpu}}"
        )
        template = _one(
            f"apiVersion: resource.k8s.io/{version}\nkind: ResourceClaimTemplate\n"
            "metadata: {name: t, namespace: ml}\n"
            "spec:\n  metadata: {labels: {x: y}, annotations: {n: m}}\n"
            f"  spec: {{devices: {{requests: [{request}]}}}}\n"
        )
        assert isinstance(template, ClaimTemplateDocument)
        assert (template.claim_labels, template.claim_annotations) == ({"x": "y"}, {"n": "m"})
        assert template.spec.requests == (DeviceRequest("gpu", ExactDeviceRequest("gpu")),)
        cls = _one(
            f"apiVersion: resource.k8s.io/{version}\nkind: DeviceClass\nmetadata: {{name: gpu.example.com}}\n"
            "spec:\n  selectors: [{cel: {expression: \"device.driver == 'gpu.example.com'\"}}]\n"
            "  config: [{opaque: {driver: gpu.example.com, parameters: {a: 1}}}]\n"
            "  extendedResourceName: example.com/gpu\n"
        )
        assert cls == DeviceClassDocument(
            cls.meta,  # type: ignore[attr-defined]
            ("device.driver == 'gpu.example.com'",),
            (DeviceClaimConfiguration((), OpaqueConfig("gpu.example.com", {"a": 1})),),
            "example.com/gpu",
        )
        assert (cls.meta.namespace, cls.meta.key) == ("", "gpu.example.com")  # type: ignore[attr-defined]
    ns = _one("apiVersion: v1\nkind: Namespace\nmetadata: {name: ops, labels: {team: a}}\n")
    assert isinstance(ns, NamespaceDocument) and ns.meta.labels == {"team": "a"} and ns.meta.key == "ops"


def test_a_user_written_allocation_reads_and_writes_back_as_v1() -> None:
    status = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"},
                    {
                        "request": "nic/fast",
                        "driver": "gpu.example.com",
                        "pool": "node-1",
                        "device": "gpu-1",
                        "adminAccess": True,
                    },
                ],
                "config": [
                    {
                        "source": "FromClass",
                        "requests": ["gpu"],
                        "opaque": {"driver": "gpu.example.com", "parameters": {"a": 1}},
                    }
                ],
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
                ]
            },
        },
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}],
    }
    text = V1_CLAIM.format(version="v1") + "status: " + json.dumps(status) + "\n"
    claim = _one(text)
    assert isinstance(claim, ClaimDocument) and isinstance(claim.allocation, AllocationResult)
    assert claim.allocation.node_name == "node-1"
    assert claim.allocation.to_json() == status["allocation"]
    assert claim.allocation.drivers == ["gpu.example.com"]
    assert claim.allocation.device_ids() == (
        ("gpu.example.com", "node-1", "gpu-0"),
        ("gpu.example.com", "node-1", "gpu-1"),
    )
    assert claim.reserved_for == (dra.ConsumerReference("pods", "p", "u1"),)
    empty = _one(V1_CLAIM.format(version="v1") + "status: {reservedFor: []}\n")
    assert isinstance(empty, ClaimDocument) and empty.reserved_for == ()  # present and empty: authoritative


BAD_KINDS = [
    (
        "apiVersion: resource.k8s.io/v1alpha3\nkind: ResourceClaim\nmetadata: {name: c}\n",
        'kind ResourceClaim: apiVersion "resource.k8s.io/v1alpha3" is not supported '
        "(use resource.k8s.io/v1, v1beta2 or v1beta1)",
    ),
    (
        "apiVersion: v1\nkind: DeviceClass\nmetadata: {name: c}\n",
        'kind DeviceClass: apiVersion "v1" is not supported (use resource.k8s.io/v1, v1beta2 or v1beta1)',
    ),
    (
        "apiVersion: resource.k8s.io/v1\nkind: Namespace\nmetadata: {name: n}\n",
        'kind Namespace: apiVersion "resource.k8s.io/v1" is not supported (use v1)',
    ),
    (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
        'unsupported kind "Deployment" (apiVersion "apps/v1") — supported: Pod, Namespace, ResourceClaim, '
        "ResourceClaimTemplate, DeviceClass, DeviceTaintRule",
    ),
    (
        "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s}\n",
        'unsupported kind "ResourceSlice" (apiVersion "resource.k8s.io/v1") — supported: Pod, Namespace, '
        "ResourceClaim, ResourceClaimTemplate, DeviceClass, DeviceTaintRule",
    ),
    ("apiVersion: v1\nmetadata: {name: k}\n", "no kind"),
    ("apiVersion: v1\nkind: 7\n", "no kind"),
    (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n---\nkind: 7\n",
        "document 2: no kind",
    ),
    (
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {namespace: x}\n",
        "ResourceClaim: missing metadata.name",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD_KINDS)
def test_kinds_and_versions_get_their_texts(text: str, message: str) -> None:
    with pytest.raises(ManifestError) as err:
        parse_file("f.yaml", text.encode())
    assert str(err.value) == message


GPU = "{name: gpu, exactly: {deviceClassName: gpu}}"


def test_the_uid_is_the_documented_hash() -> None:
    text = _claim(f"[{GPU}]")
    claim = _one(text, file="claims.yaml")
    assert isinstance(claim, ClaimDocument)
    doc = yaml.safe_load(text)
    digest = hashlib.sha256(b"default\0c1\0claims.yaml\0" + canonical_json(doc)).hexdigest()
    uid = f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
    assert claim.meta.uid == uid == document_uid(doc, "default", "c1", "claims.yaml")
    assert canonical_json({"b": "é", "a": [1, None]}) == '{"a":[1,null],"b":"é"}'.encode()
    dated = yaml.safe_load("a: 2024-01-02\nb: 2024-01-02T03:04:05Z\n")
    assert canonical_json(dated) == b'{"a":"2024-01-02","b":"2024-01-02T03:04:05+00:00"}'
    given = _one(text.replace("{name: c1}", "{name: c1, uid: my-uid}"))
    assert isinstance(given, ClaimDocument) and given.meta.uid == "my-uid"


def test_claim_identity_survives_comments_layout_and_neighbours() -> None:
    """A comment, a re-indentation or an edit of another claim keeps c1's UID; its spec or the file's name
    changes it."""
    c1 = _claim(f"[{GPU}]")
    c2 = c1.replace("name: c1", "name: c2")

    def uids(text: str, file: str = "claims.yaml") -> dict[str, str]:
        return {d.meta.name: d.meta.uid for d in parse_file(file, text.encode(), file).dra}

    first = uids(c1 + "---\n" + c2)
    reindented = json.dumps(yaml.safe_load(c1), indent=8) + "\n---\n" + c2
    assert uids("# a comment\n" + c1 + "---\n" + c2 + "# end\n")["c1"] == first["c1"]
    assert uids(reindented)["c1"] == first["c1"]
    neighbour = uids(c1 + "---\n" + c2.replace("deviceClassName: gpu", "deviceClassName: other"))
    assert neighbour["c1"] == first["c1"] and neighbour["c2"] != first["c2"]
    assert (
        uids(c1.replace("deviceClassName: gpu", "deviceClassName: other") + "---\n" + c2)["c1"] != first["c1"]
    )
    assert uids(c1 + "---\n" + c2, "renamed.yaml")["c1"] != first["c1"]


def test_a_file_mixes_kinds_and_lists_are_flattened() -> None:
    """Scenario: one file holding a Namespace, a template and a pod (dra-example-driver's demo layout)."""
    text = (
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ml, labels: {team: a}}\n---\n"
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: gpu, namespace: ml}\n"
        "spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]}}}\n"
        "---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml}\n"
        "spec:\n  resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu}]\n"
        "  containers: [{name: c, resources: {claims: [{name: gpu}]}}]\n"
    )
    parsed = parse_file("demo.yaml", text.encode())
    assert [type(d).KIND for d in parsed.dra] == ["Namespace", "ResourceClaimTemplate"]
    [pod] = parsed.pods
    assert pod.claims.resource_claims == (dra.PodClaim("gpu", None, "gpu"),)
    as_list = {"kind": "List", "items": [yaml.safe_load(d) for d in text.split("---\n")]}
    listed = parse_file("demo.json", json.dumps(as_list).encode())
    assert [type(d).KIND for d in listed.dra] == ["Namespace", "ResourceClaimTemplate"]
    assert [m.pod.name for m in listed.pods] == ["p"]


def test_the_same_document_twice_in_a_file_refuses_it() -> None:
    c1 = _claim(f"[{GPU}]")
    with pytest.raises(ManifestError, match=r"^ResourceClaim default/c1 appears twice$"):
        parse_file("f.yaml", (c1 + "---\n" + c1.replace("gpu}", "gpu2}")).encode())
    template = c1.replace("kind: ResourceClaim", "kind: ResourceClaimTemplate").replace(
        "spec:\n  devices:", "spec:\n spec:\n  devices:"
    )
    assert len(parse_file("f.yaml", (c1 + "---\n" + template).encode()).dra) == 2  # another kind: fine
    cls = (
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: a}\n"
        "spec: {extendedResourceName: x.com/gpu}\n"
    )
    with pytest.raises(ManifestError) as err:
        parse_file("f.yaml", (cls + "---\n" + cls.replace("name: a", "name: b")).encode())
    assert str(err.value) == "DeviceClass b: extendedResourceName x.com/gpu is already used by DeviceClass a"
