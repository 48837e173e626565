"""Registration checks: extended resource names, versions and endpoints."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kubedevice.manager import RegistrationError, is_extended_resource_name
from kubedevice.manager.registration import check_resource_name, check_version, resolve_endpoint

VALID = [
    "nvidia.com/gpu",
    "example.com/Foo_bar.baz",
    "a/b",
    "x.y-z.io/a-b",
    "example.com/GPU",
    "a" * 244 + "/x",  # the longest vendor domain: 253 - len("requests.")
    "example.com/" + "n" * 63,
    "example.com/9",
]
INVALID = [
    ("gpu", "no slash: a native resource"),
    ("example.com/a/b", "more than one slash"),
    ("kubernetes.io/foo", "the kubernetes.io/ namespace"),
    ("foo.kubernetes.io/bar", "contains kubernetes.io/"),
    ("Example.com/gpu", "upper-case domain"),
    ("requests.example.com/gpu", "the requests. prefix"),
    ("/gpu", "empty domain"),
    ("example.com/", "empty name"),
    ("example.com/-gpu", "name starts with a dash"),
    ("example.com/gpu-", "name ends with a dash"),
    ("example_com/gpu", "underscore in the domain"),
    ("example.com/g pu", "space in the name"),
    ("a" * 245 + "/x", "domain too long"),
    ("example.com/" + "n" * 64, "name too long"),
    ("-example.com/gpu", "domain starts with a dash"),
    ("example..com/gpu", "empty domain label"),
    ("", "empty"),
]


@pytest.mark.parametrize("name", VALID)
def test_valid_extended_resource_names(name: str) -> None:
    assert is_extended_resource_name(name)
    check_resource_name(name)


@pytest.mark.parametrize(("name", "why"), INVALID)
def test_invalid_extended_resource_names(name: str, why: str) -> None:
    assert not is_extended_resource_name(name), why
    with pytest.raises(RegistrationError) as err:
        check_resource_name(name)
    assert str(err.value) == f'the ResourceName "{name}" is invalid'
    assert err.value.invalid


def test_version_check() -> None:
    check_version("v1beta1")
    with pytest.raises(RegistrationError) as err:
        check_version("v1")
    assert (
        str(err.value)
        == 'requested API version "v1" is not supported by kubelet. Supported version is ["v1beta1"]'
    )


def test_endpoint_inside_the_directory(tmp_path: Path) -> None:
    assert resolve_endpoint(tmp_path, "p.sock") == str(tmp_path / "p.sock")
    assert resolve_endpoint(tmp_path, "sub/../p.sock") == str(tmp_path / "p.sock")
    (tmp_path / "sub").mkdir()
    assert resolve_endpoint(tmp_path, "sub/p.sock") == str(tmp_path / "sub" / "p.sock")
    # A symlink that stays inside is fine.
    os.symlink(tmp_path / "p.sock", tmp_path / "alias.sock")
    assert resolve_endpoint(tmp_path, "alias.sock") == str(tmp_path / "alias.sock")


@pytest.mark.parametrize(
    ("endpoint", "fragment"),
    [
        ("../x.sock", "escapes to"),
        ("a/../../x.sock", "escapes to"),
        ("..", "escapes to"),
        (".", "escapes to"),
        ("/abs.sock", "absolute path"),
        ("", "invalid endpoint ''"),
        ("a\x00b", "invalid endpoint"),
        ("x" * 200 + ".sock", "longer than 107 bytes"),
    ],
)
def test_endpoint_escaping_the_directory_is_refused(tmp_path: Path, endpoint: str, fragment: str) -> None:
    with pytest.raises(RegistrationError) as err:
        resolve_endpoint(tmp_path, endpoint)
    assert fragment in str(err.value)
    assert str(tmp_path) in str(err.value)
    assert err.value.invalid


def test_endpoint_symlink_pointing_outside_is_refused(tmp_path: Path) -> None:
    inside = tmp_path / "dp"
    inside.mkdir()
    os.symlink(tmp_path / "elsewhere.sock", inside / "evil.sock")
    os.symlink(tmp_path, inside / "up")
    for endpoint in ("evil.sock", "up/x.sock"):
        with pytest.raises(RegistrationError, match="resolves through a symlink"):
            resolve_endpoint(inside, endpoint)
