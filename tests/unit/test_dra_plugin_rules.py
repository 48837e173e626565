"""The DRA plugin manager's pure rules: service choice, Go's %q, name and endpoint checks, metric buckets."""

from __future__ import annotations

import math

import grpc
import pytest

from kubedevice.dra.client import go_code_name
from kubedevice.dra.errors import DRARegistrationError
from kubedevice.dra.metrics import DRA_BUCKETS, exponential_buckets_range
from kubedevice.dra.registration import (
    check_driver_name,
    check_endpoint,
    choose_health_service,
    choose_service,
    go_quote,
    go_quote_list,
)
from kubedevice.pluginwatcher.handler import PluginHandlerError


def test_go_quote_matches_strconv_quote() -> None:
    assert go_quote_list(["v1.DRAPlugin", "v1beta1.DRAPlugin"]) == '["v1.DRAPlugin" "v1beta1.DRAPlugin"]'
    assert go_quote_list([]) == "[]"
    assert go_quote('a"b\\c\n\t\x01é\u200b') == '"a\\"b\\\\c\\n\\t\\x01é\\u200b"'


@pytest.mark.parametrize(
    ("versions", "chosen"),
    [
        (["v1.DRAPlugin", "v1beta1.DRAPlugin"], "v1.DRAPlugin"),
        (["v1beta1.DRAPlugin", "v1.DRAPlugin"], "v1beta1.DRAPlugin"),
        (["1.0.0", "v1beta1.DRAPlugin"], "v1beta1.DRAPlugin"),
        (["v1alpha1.DRAResourceHealth", "v1.DRAPlugin"], "v1.DRAPlugin"),
    ],
)
def test_the_plugins_order_decides(versions: list[str], chosen: str) -> None:
    assert choose_service("d.example.com", "/e.sock", versions) == chosen


def test_no_usable_service_is_refused_with_the_wrapped_text() -> None:
    with pytest.raises(DRARegistrationError) as caught:
        choose_service("d.example.com", "/e.sock", ["v1alpha3.NodeService"])
    assert str(caught.value) == (
        "invalid supported gRPC versions of DRA driver plugin d.example.com at endpoint /e.sock: "
        'none of services supported by the plugin (["v1alpha3.NodeService"]) are supported by the kubelet '
        '(["v1.DRAPlugin" "v1beta1.DRAPlugin"])'
    )
    assert isinstance(caught.value, PluginHandlerError)


def test_health_service_choice() -> None:
    assert (
        choose_health_service(["v1alpha1.DRAResourceHealth", "v1.DRAResourceHealth"])
        == "v1.DRAResourceHealth"
    )
    assert choose_health_service(["v1alpha1.DRAResourceHealth"]) == "v1alpha1.DRAResourceHealth"
    assert choose_health_service(["v1.DRAPlugin"]) is None


@pytest.mark.parametrize("name", ["gpu.example.com", "a", "a-b.c-d", "x" * 63 + "." + "y" * 63])
def test_good_driver_names(name: str) -> None:
    check_driver_name(name)


@pytest.mark.parametrize("name", ["", "GPU.example.com", "-a.com", "a..b", "a/b", "../x", "a_b", "x" * 254])
def test_bad_driver_names(name: str) -> None:
    with pytest.raises(DRARegistrationError):
        check_driver_name(name)


@pytest.mark.parametrize(
    ("endpoint", "error"),
    [
        ("d.sock", 'invalid endpoint "d.sock" of DRA driver plugin d: it must be an absolute path'),
        ("/a\x00b", 'invalid endpoint "/a\\x00b" of DRA driver plugin d: it must be an absolute path'),
        (
            "/" + "s" * 107,
            f'invalid endpoint "/{"s" * 107}" of DRA driver plugin d: it is longer than 107 bytes, '
            "the limit of a unix socket path",
        ),
    ],
)
def test_bad_endpoints(endpoint: str, error: str) -> None:
    with pytest.raises(DRARegistrationError) as caught:
        check_endpoint("d", endpoint)
    assert str(caught.value) == error
    check_endpoint("d", "/" + "s" * 106)


def test_buckets_are_gos_exponential_buckets_range() -> None:
    assert len(DRA_BUCKETS) == 15
    assert DRA_BUCKETS[0] == 0.1
    assert math.isclose(DRA_BUCKETS[-1], 40.0, rel_tol=1e-12)
    growth = (40 / 0.1) ** (1 / 14)
    # Each bound is min * growth^i, computed directly as Go does (not by repeated multiplication).
    assert tuple(0.1 * math.pow(growth, i) for i in range(15)) == DRA_BUCKETS
    assert math.isclose(DRA_BUCKETS[1], 0.153413, rel_tol=1e-5)
    assert math.isclose(DRA_BUCKETS[7], 2.0, rel_tol=1e-12)  # the geometric middle of 0.1 and 40
    assert exponential_buckets_range(1, 8, 4) == (1.0, 2.0, 4.0, 8.0)
    with pytest.raises(ValueError):
        exponential_buckets_range(0, 1, 3)


def test_go_code_names() -> None:
    assert go_code_name(grpc.StatusCode.OK) == "OK"
    assert go_code_name(grpc.StatusCode.CANCELLED) == "Canceled"
    assert go_code_name(grpc.StatusCode.DEADLINE_EXCEEDED) == "DeadlineExceeded"
    assert go_code_name(grpc.StatusCode.UNAVAILABLE) == "Unavailable"
