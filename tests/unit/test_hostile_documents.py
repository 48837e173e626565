"""Names, quantities and text a careless script or a hostile user writes (issue 35): each refused with one
line naming the field, as the API server refuses it."""

import json
import logging
from typing import Any

import pytest

from kubedevice.logs import EscapingFormatter, escaped
from kubedevice.node.manifests import parse_file
from kubedevice.resource.document_file import ManifestError
from kubedevice.resource.documents import read_document
from kubedevice.resource.fields import DocumentError
from kubedevice.resource.quantity import parse_device_count, parse_quantity

GPU = "example.com/gpu"
#: An Arabic-Indic digit one: Go reads only '0'-'9'.
ARABIC_ONE = "\u0661"
SUBDOMAIN = "is not a DNS subdomain (lower-case letters, digits, '-' and '.', at most 253)"
LABEL = "is not a DNS label (lower-case letters, digits and '-', at most 63)"


def pod(name: Any = "p", namespace: Any = None, container: Any = "c", limits: Any = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    c: dict[str, Any] = {"name": container}
    if limits is not None:
        c["resources"] = {"limits": limits}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [c]}}


def refusal(doc: Any) -> str:
    with pytest.raises(ManifestError) as err:
        parse_file("p.json", json.dumps(doc).encode())
    return str(err.value)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (pod("Upper"), f"pod: metadata.name: 'Upper' {SUBDOMAIN}"),
        (pod("a_b"), f"pod: metadata.name: 'a_b' {SUBDOMAIN}"),
        (pod("a/b"), f"pod: metadata.name: 'a/b' {SUBDOMAIN}"),
        (pod("a..b"), f"pod: metadata.name: 'a..b' {SUBDOMAIN}"),
        (pod("a b"), f"pod: metadata.name: 'a b' {SUBDOMAIN}"),
        (pod("a\0b"), f"pod: metadata.name: 'a\\x00b' {SUBDOMAIN}"),
        (pod("a" * 300), f"pod: metadata.name: {'a' * 80!r}… (300 characters) {SUBDOMAIN}"),
        (pod("a" * (1 << 20)), f"pod: metadata.name: {'a' * 80!r}… (1048576 characters) {SUBDOMAIN}"),
        (pod(3.5), "pod: metadata.name: must be a string, not a float"),
        (pod(namespace="Bad"), f"pod p: metadata.namespace: 'Bad' {LABEL}"),
        (pod(namespace="a.b"), f"pod p: metadata.namespace: 'a.b' {LABEL}"),
        (pod(namespace="n" * 64), f"pod p: metadata.namespace: {'n' * 64!r} {LABEL}"),
        (pod(container="Main_1"), f"pod default/p: spec.containers[0].name: 'Main_1' {LABEL}"),
        (pod(container=7), "pod default/p: spec.containers[0].name: must be a string, not an integer"),
    ],
)
def test_pod_names_follow_the_api_servers_rules(doc: dict[str, Any], message: str) -> None:
    assert refusal(doc) == message


def test_the_longest_names_the_api_server_takes_are_taken() -> None:
    name = ".".join(["a" * 63] * 4)[:253]
    m = parse_file("p.json", json.dumps(pod(name, "n" * 63, "c" * 63)).encode())
    assert m.pods[0].pod.name == name


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (pod("a\ud800"), "metadata.name: 'a\\ud800' is not valid UTF-8 (a lone surrogate)"),
        (
            pod(container="c\udfff"),
            "spec.containers[0].name: 'c\\udfff' is not valid UTF-8 (a lone surrogate)",
        ),
        (pod(namespace="\ud800"), "metadata.namespace: '\\ud800' is not valid UTF-8 (a lone surrogate)"),
        (
            {**pod(), "x": [{"k\ud800": 1}]},
            "x[0]: 'k\\ud800' is not valid UTF-8 (a lone surrogate)",
        ),
    ],
)
def test_a_lone_surrogate_anywhere_refuses_the_document(doc: dict[str, Any], message: str) -> None:
    assert refusal(doc) == message


def test_a_lone_surrogate_in_the_second_document_names_its_position() -> None:
    text = json.dumps({"kind": "List", "items": [pod("a"), pod("b\ud800")]}).encode()
    with pytest.raises(ManifestError, match=r"^document 2: metadata.name: 'b\\ud800' is not valid UTF-8"):
        parse_file("p.json", text)


def test_dra_documents_and_slices_refuse_a_lone_surrogate_and_a_name_that_is_no_string() -> None:
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c\ud800"}}
    with pytest.raises(DocumentError, match=r"^metadata.name: 'c\\ud800' is not valid UTF-8"):
        read_document(claim)
    claim["metadata"] = {"name": 3.5}
    with pytest.raises(DocumentError, match=r"^ResourceClaim: metadata.name: must be a string, not a float$"):
        read_document(claim)
    sliced = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"}}
    sliced["spec"] = {"driver": "d\ud800"}
    with pytest.raises(DocumentError, match=r"^spec.driver: 'd\\ud800' is not valid UTF-8"):
        read_document(sliced)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (ARABIC_ONE, f"{ARABIC_ONE!r} is not a quantity"),
        (" 1", "' 1' is not a quantity"),
        ("1 ", "'1 ' is not a quantity"),
        ("1\n", "'1\\n' is not a quantity"),
        ("NaN", "'NaN' is not a quantity"),
        (float("nan"), "nan is not a quantity"),
        (float("inf"), "inf is not a quantity"),
        ("1e999999Gi", "'1e999999Gi' is not a quantity"),
        ("1e2147483648", "'1e2147483648' is not a quantity"),  # past int32, as strconv.ParseInt(.., 32)
        ("1e999999", "'1e999999' is more than 9223372036854775807 devices (a count is an int64)"),
        (2**63, "9223372036854775808 is more than 9223372036854775807 devices (a count is an int64)"),
        (2**64 + 1, "18446744073709551617 is more than 9223372036854775807 devices (a count is an int64)"),
    ],
)
def test_device_counts_read_as_apimachinery_reads_quantities(value: object, message: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_device_count(value)
    assert str(err.value) == message


def test_quantities_apimachinery_takes_are_taken() -> None:
    assert parse_device_count("-0") == 0  # ParseQuantity("-0") is zero
    assert parse_device_count(2**63 - 1) == 2**63 - 1
    assert parse_device_count("+2") == 2
    assert parse_quantity("1e2000000") > 0  # any int32 exponent is exact, as inf.Dec holds it


def test_a_pod_limit_names_its_field() -> None:
    message = refusal(pod(limits={GPU: ARABIC_ONE}))
    assert (
        message == f"pod default/p: spec.containers[0] (c): limits of {GPU}: {ARABIC_ONE!r} is not a quantity"
    )


def test_limit_keys_that_are_not_strings_are_refused() -> None:
    text = b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n"
    text += b"    resources:\n      limits: {1: 2, example.com/gpu: 1}\n"
    with pytest.raises(ManifestError) as err:
        parse_file("p.yaml", text)
    assert str(err.value) == "pod default/p: spec.containers[0] (c): resources.limits: key 1 is not a string"


def test_control_characters_never_reach_a_log_line_raw() -> None:
    assert escaped("pod a\x1b[31mb\x00\n\x7f\x9b\ud800 é") == "pod a\\x1b[31mb\\x00\\x0a\\x7f\\x9b\\ud800 é"
    # What reorders or breaks a terminal's line without a control character: a right-to-left override, an
    # isolate, a mark, a line separator (found in names by the fuzz suite).
    assert escaped("a\u202eb\u2066c\u200fd\u2028e") == "a\\u202eb\\u2066c\\u200fd\\u2028e"
    record = logging.LogRecord("x", logging.ERROR, "f", 1, "manifest %s: %s", ("\x1b[31m.yaml", "bad"), None)
    line = EscapingFormatter("%(levelname)s %(message)s").format(record)
    assert line == "ERROR manifest \\x1b[31m.yaml: bad"


def test_claim_counts_are_int64_and_label_keys_strings() -> None:
    claim: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c"},
    }
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 2**64}}
    claim["spec"] = {"devices": {"requests": [request]}}
    with pytest.raises(DocumentError) as err:
        read_document(claim)
    at = "ResourceClaim default/c: spec.devices.requests[0].exactly.count"
    assert str(err.value) == f"{at}: 18446744073709551616 does not fit in an int64"
    claim = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n", "labels": {1: "x"}}}
    with pytest.raises(DocumentError) as err:
        read_document(claim)
    assert str(err.value) == "Namespace n: metadata.labels: key 1 is not a string"
