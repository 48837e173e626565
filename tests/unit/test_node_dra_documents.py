"""DRA documents in the manifest folder: versions, texts, identity, validation, left-out features."""

import hashlib
import json

import pytest
import yaml

from kubedevice.dra import types as dra
from kubedevice.node.dra.model import (
    Allocation,
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
    SelectorCompileError,
)
from kubedevice.node.identity import canonical_json, document_uid
from kubedevice.node.manifests import ManifestError, parse_file


class NoDoubleBang:
    """A stand-in CEL compiler: refuses any expression holding `!!`, records what it saw."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def compile(self, expression: str) -> None:
        self.seen.append(expression)
        if "!!" in expression:
            raise SelectorCompileError("ERROR: <input>:1:1: Syntax error:\n  mismatched input '!!'")


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


def _one(text: str, compiler: NoDoubleBang | None = None, file: str = "f.yaml") -> object:
    parsed = parse_file(file, text.encode(), file, compiler)
    [doc] = [*parsed.pods, *parsed.dra]
    return doc


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
    assert claim.spec.unsupported is None and claim.allocation is None and claim.reserved_for is None
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
    assert isinstance(claim, ClaimDocument) and isinstance(claim.allocation, Allocation)
    assert claim.allocation.node_name == "node-1"
    assert claim.allocation.to_json() == status["allocation"]
    assert claim.allocation.to_dra().drivers == ["gpu.example.com"]
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
        "ResourceClaimTemplate, DeviceClass",
    ),
    (
        "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s}\n",
        'unsupported kind "ResourceSlice" (apiVersion "resource.k8s.io/v1") — supported: Pod, Namespace, '
        "ResourceClaim, ResourceClaimTemplate, DeviceClass",
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


def _claim(requests: str, extra: str = "", version: str = "v1") -> str:
    return (
        f"apiVersion: resource.k8s.io/{version}\nkind: ResourceClaim\nmetadata: {{name: c1}}\n"
        f"spec:\n  devices:\n    requests: {requests}\n{extra}"
    )


GPU = "{name: gpu, exactly: {deviceClassName: gpu}}"
P = "ResourceClaim default/c1: spec.devices."
BAD_CLAIMS = [
    (
        _claim("[{name: Gpu, exactly: {deviceClassName: gpu}}]"),
        P + "requests[0].name: 'Gpu' is not a DNS label",
    ),
    (_claim("[{exactly: {deviceClassName: gpu}}]"), P + "requests[0].name: is required"),
    (_claim(f"[{GPU}, {GPU}]"), P + "requests[1].name: 'gpu' is used by another request"),
    (_claim("[{name: gpu}]"), P + "requests[0]: exactly one of exactly or firstAvailable must be set"),
    (
        _claim(
            "[{name: gpu, exactly: {deviceClassName: gpu}, firstAvailable: [{name: a, deviceClassName: g}]}]"
        ),
        P + "requests[0]: exactly one of exactly or firstAvailable must be set",
    ),
    (
        _claim(
            "[{name: gpu, deviceClassName: g, firstAvailable: [{name: a, deviceClassName: g}]}]",
            version="v1beta1",
        ),
        P + "requests[0]: deviceClassName and firstAvailable cannot both be set",
    ),
    (_claim("[{name: gpu, exactly: {}}]"), P + "requests[0].exactly.deviceClassName: is required"),
    (
        _claim("[{name: gpu, exactly: {deviceClassName: Bad_Class}}]"),
        P + "requests[0].exactly.deviceClassName: 'Bad_Class' is not a DNS subdomain",
    ),
    (
        _claim("[{name: gpu, exactly: {deviceClassName: gpu, count: 0}}]"),
        P + "requests[0].exactly.count: must be at least 1, not 0",
    ),
    (
        _claim("[{name: gpu, exactly: {deviceClassName: gpu, count: two}}]"),
        P + "requests[0].exactly.count: must be an integer, not a string",
    ),
    (
        _claim("[{name: gpu, exactly: {deviceClassName: gpu, allocationMode: Some}}]"),
        P + "requests[0].exactly.allocationMode: 'Some' is not ExactCount or All",
    ),
    (
        _claim("[{name: gpu, exactly: {deviceClassName: gpu, allocationMode: All, count: 2}}]"),
        P + "requests[0].exactly.count: must not be set when allocationMode is All",
    ),
    (
        _claim("[{name: gpu, deviceClassName: gpu, count: -1}]", version="v1beta1"),
        P + "requests[0].count: must be at least 1, not -1",
    ),
    (
        _claim("[{name: gpu, firstAvailable: []}]"),
        P + "requests[0].firstAvailable: must list at least one subrequest",
    ),
    (
        _claim("[{name: gpu, firstAvailable: [{name: a, deviceClassName: g, adminAccess: true}]}]"),
        P + "requests[0].firstAvailable[0].adminAccess: is not allowed in a subrequest",
    ),
    (
        _claim(
            "[{name: gpu, firstAvailable: [{name: a, deviceClassName: g}, {name: a, deviceClassName: g}]}]"
        ),
        P + "requests[0].firstAvailable[1].name: 'a' is used by another subrequest",
    ),
    (
        _claim("[" + ", ".join(f"{{name: r{i}, exactly: {{deviceClassName: g}}}}" for i in range(33)) + "]"),
        P + "requests: must have at most 32 items, has 33",
    ),
    (
        _claim(f"[{GPU}]", "    constraints: [{requests: [nic], matchAttribute: x.com/a}]\n"),
        P + "constraints[0].requests[0]: no request named 'nic'",
    ),
    (
        _claim(f"[{GPU}]", "    constraints: [{requests: [gpu]}]\n"),
        P + "constraints[0]: exactly one of matchAttribute or distinctAttribute must be set",
    ),
    (
        _claim(f"[{GPU}]", "    constraints: [{matchAttribute: numa}]\n"),
        P + "constraints[0].matchAttribute: 'numa' is not a fully qualified attribute (<domain>/<name>)",
    ),
    (
        _claim(f"[{GPU}]", "    config: [{requests: [gpu/x], opaque: {driver: d.com, parameters: {}}}]\n"),
        P + "config[0].requests[0]: no request named 'gpu/x'",
    ),
    (
        _claim(f"[{GPU}]", "    config: [{opaque: {driver: d.com}}]\n"),
        P + "config[0].opaque.parameters: is required",
    ),
    (
        _claim("[{name: gpu, exactly: {deviceClassName: gpu, selectors: [{cel: {}}]}}]"),
        P + "requests[0].exactly.selectors[0].cel.expression: is required",
    ),
    (
        _claim("[{name: gpu, exactly: {deviceClassName: gpu, selectors: [{cel: {expression: '!!x'}}]}}]"),
        P + "requests[0].exactly.selectors[0].cel.expression: CEL compile error: "
        "ERROR: <input>:1:1: Syntax error: mismatched input '!!'",
    ),
    (
        _claim(
            "[{name: gpu, deviceClassName: gpu, selectors: [{cel: {expression: '!!x'}}]}]", version="v1beta1"
        ),
        P + "requests[0].selectors[0].cel.expression: CEL compile error: "
        "ERROR: <input>:1:1: Syntax error: mismatched input '!!'",
    ),
    (
        _claim(f"[{GPU}]").replace("{name: c1}", "{name: c1, namespace: Bad}"),
        "ResourceClaim c1: metadata.namespace: 'Bad' is not a DNS label",
    ),
    (
        _claim(f"[{GPU}]").replace("{name: c1}", "{name: C1}"),
        "ResourceClaim default/C1: metadata.name: 'C1' is not a DNS subdomain",
    ),
    (
        _claim(f"[{GPU}]").replace("{name: c1}", "{name: c1, labels: {a: 1}}"),
        "ResourceClaim default/c1: metadata.labels.a: must be a string, not an integer",
    ),
    (
        _claim(f"[{GPU}]") + "status: {allocation: {devices: {results: [{request: gpu, driver: d.com}]}}}\n",
        "ResourceClaim default/c1: status.allocation.devices.results[0].pool: is required",
    ),
    (
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: g}\n"
        "spec: {selectors: [{cel: {expression: 'a !! b'}}]}\n",
        "DeviceClass g: spec.selectors[0].cel.expression: CEL compile error: "
        "ERROR: <input>:1:1: Syntax error: mismatched input '!!'",
    ),
    (
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: g}\n"
        "spec: {extendedResourceName: gpu}\n",
        "DeviceClass g: spec.extendedResourceName: 'gpu' is not a valid extended resource name",
    ),
    (
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: t}\n"
        "spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu, count: 0}}]}}}\n",
        "ResourceClaimTemplate default/t: spec.spec.devices.requests[0].exactly.count: "
        "must be at least 1, not 0",
    ),
    (
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: a.b}\n",
        "Namespace a.b: metadata.name: 'a.b' is not a DNS label",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD_CLAIMS)
def test_bad_documents_name_the_field(text: str, message: str) -> None:
    with pytest.raises(ManifestError) as err:
        parse_file("f.yaml", text.encode(), None, NoDoubleBang())
    assert str(err.value).startswith(message), str(err.value)


def test_a_selector_is_not_compiled_without_a_compiler() -> None:
    claim = _one(
        _claim("[{name: gpu, exactly: {deviceClassName: gpu, selectors: [{cel: {expression: '!!'}}]}}]")
    )
    assert isinstance(claim, ClaimDocument)


@pytest.mark.parametrize(
    ("request_", "extra", "feature"),
    [
        (
            "{name: g, exactly: {deviceClassName: g, tolerations: [{key: k, operator: Exists}]}}",
            "",
            "device taints and tolerations",
        ),
        (
            "{name: g, firstAvailable: [{name: a, deviceClassName: g, tolerations: [{key: k}]}]}",
            "",
            "device taints and tolerations",
        ),
        (
            "{name: g, exactly: {deviceClassName: g, capacity: {requests: {memory: 1Gi}}}}",
            "",
            "consumable capacity",
        ),
        (
            "{name: g, exactly: {deviceClassName: g}}",
            "    constraints: [{distinctAttribute: x.com/a}]\n",
            "consumable capacity",
        ),
        (
            "{name: g, deviceClassName: g, tolerations: [{key: k}]}",
            "v1beta1",
            "device taints and tolerations",
        ),
    ],
)
def test_left_out_features_are_recorded_not_refused(request_: str, extra: str, feature: str) -> None:
    version = "v1beta1" if extra == "v1beta1" else "v1"
    claim = _one(_claim(f"[{request_}]", "" if extra == "v1beta1" else extra, version))
    assert isinstance(claim, ClaimDocument) and claim.spec.unsupported == feature


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


POD = """\
apiVersion: v1
kind: Pod
metadata: {name: p, uid: u1}
spec:
  resourceClaims:
  - {name: shared, resourceClaimName: c1}
  - {name: own, resourceClaimTemplateName: gpu-tmpl}
  initContainers:
  - name: init
    resources: {claims: [{name: shared}]}
  containers:
  - name: main
    resources: {claims: [{name: shared, request: gpu}, {name: own}]}
  - name: plain
"""


def test_pods_read_their_claims_and_convert_for_the_dra_manager() -> None:
    [m] = parse_file("p.yaml", POD.encode()).pods
    status = dra.ExtendedResourceClaimStatus("p-extended-resources-abcde")
    pod = m.dra_pod({"shared": "c1", "own": "p-own-xyz12"}, status)
    assert pod == dra.Pod(
        uid="u1",
        namespace="default",
        name="p",
        resource_claims=(dra.PodClaim("shared", "c1"), dra.PodClaim("own", None, "gpu-tmpl")),
        containers=(
            dra.Container("init", (dra.ContainerClaim("shared"),)),
            dra.Container("main", (dra.ContainerClaim("shared", "gpu"), dra.ContainerClaim("own"))),
            dra.Container("plain", ()),
        ),
        claim_statuses={"shared": "c1", "own": "p-own-xyz12"},
        extended_resource_claim=status,
    )
    assert (
        m.claims
        and not parse_file(
            "q.yaml", POD.split("  resourceClaims")[0].encode() + b"  containers: [{name: c}]\n"
        )
        .pods[0]
        .claims
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ("{name: own, resourceClaimTemplateName: gpu-tmpl}", "{name: own}"),
            "pod default/p: spec.resourceClaims[1]: "
            "exactly one of resourceClaimName or resourceClaimTemplateName must be set",
        ),
        (
            ("{name: own, resourceClaimTemplateName: gpu-tmpl}", "{name: shared, resourceClaimName: c2}"),
            "pod default/p: spec.resourceClaims[1].name: 'shared' is used by another pod claim",
        ),
        (
            ("{name: own}]", "{name: other}]"),
            "pod default/p: spec.containers[0].resources.claims[1].name: "
            "'other' is not one of the pod's spec.resourceClaims",
        ),
        (
            ("claims: [{name: shared}]", "claims: [{name: nope}]"),
            "pod default/p: spec.initContainers[0].resources.claims[0].name: 'nope' is not one of the pod's",
        ),
        (
            ("{name: own}]", "{name: shared, request: gpu}]"),
            "pod default/p: spec.containers[0].resources.claims[1]: is listed twice",
        ),
        (
            ("resourceClaimName: c1", "resourceClaimName: C1"),
            "pod default/p: spec.resourceClaims[0].resourceClaimName: 'C1' is not a DNS subdomain",
        ),
    ],
)
def test_bad_pod_claims_name_the_field(edit: tuple[str, str], message: str) -> None:
    with pytest.raises(ManifestError) as err:
        parse_file("p.yaml", POD.replace(*edit).encode())
    assert str(err.value).startswith(message), str(err.value)
