"""DRA documents a user gets wrong: one line each, naming the document and the field path."""

import pytest

from kubedevice.dra import types as dra
from kubedevice.node.manifests import parse_file
from kubedevice.resource.document_file import ManifestError
from kubedevice.resource.model import ClaimDocument
from kubedevice.scheduler.cel import CelSelectors
from tests.dra_document_helpers import NoDoubleBang
from tests.dra_document_helpers import claim_text as _claim
from tests.dra_document_helpers import one as _one

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
        _claim(f"[{GPU}]")
        + "status: {allocation: {devices: {results: [{request: gpu, driver: d.com, pool: p, device: g,"
        + " shareID: share-1}]}}}\n",
        "ResourceClaim default/c1: status.allocation.devices.results[0].shareID: "
        "must be a lowercase UUID (8-4-4-4-12 hex digits), not 'share-1'",
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


NOT_BOOL = [
    ("device.driver", "string"),
    ("device.capacity['gpu.example.com'].memory", "kubernetes.Quantity"),
    ("device.attributes['gpu.example.com']", "map(string, dyn)"),
]


@pytest.mark.parametrize(("expression", "result"), NOT_BOOL)
def test_a_selector_whose_result_is_not_a_bool_refuses_its_document(expression: str, result: str) -> None:
    """As the API server's create: refused when read, naming the field and the result's type, not when a
    device is checked."""
    selectors = f'selectors: [{{cel: {{expression: "{expression}"}}}}]'
    documents = {
        "DeviceClass g: spec.selectors[0].cel.expression": (
            f"apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {{name: g}}\n"
            f"spec: {{{selectors}}}\n"
        ),
        P + "requests[0].exactly.selectors[0].cel.expression": _claim(
            f"[{{name: gpu, exactly: {{deviceClassName: gpu, {selectors}}}}}]"
        ),
    }
    for field, text in documents.items():
        with pytest.raises(ManifestError) as err:
            parse_file("f.yaml", text.encode(), None, CelSelectors())
        expected = f"{field}: CEL compile error: must evaluate to bool or the unknown type, not {result}"
        assert str(err.value) == expected


def test_a_selector_is_not_compiled_without_a_compiler() -> None:
    claim = _one(
        _claim("[{name: gpu, exactly: {deviceClassName: gpu, selectors: [{cel: {expression: '!!'}}]}}]")
    )
    assert isinstance(claim, ClaimDocument)


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
    assert pod == dra.DRAPod(
        uid="u1",
        namespace="default",
        name="p",
        resource_claims=(dra.PodClaim("shared", "c1"), dra.PodClaim("own", None, "gpu-tmpl")),
        containers=(
            dra.DRAContainer("init", (dra.ContainerClaim("shared"),)),
            dra.DRAContainer("main", (dra.ContainerClaim("shared", "gpu"), dra.ContainerClaim("own"))),
            dra.DRAContainer("plain", ()),
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
