"""deploy/exporter-daemonset.yaml: read-only mounts of what the exporter reads, its own CLI, locked down."""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Any

import yaml

from kubedevice.exporter.cli import DEFAULT_CHECKPOINT, parse_interval
from kubedevice.options import parse_http_addr

MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "exporter-daemonset.yaml"


def _pod() -> dict[str, Any]:
    [document] = list(yaml.safe_load_all(MANIFEST.read_text()))
    assert (document["apiVersion"], document["kind"]) == ("apps/v1", "DaemonSet")
    selector = document["spec"]["selector"]["matchLabels"]
    assert selector.items() <= document["spec"]["template"]["metadata"]["labels"].items()
    pod: dict[str, Any] = document["spec"]["template"]["spec"]
    return pod


def _args(container: dict[str, Any]) -> dict[str, str]:
    return dict(a.removeprefix("--").split("=", 1) for a in container["args"])


def test_reads_the_kubelet_paths_through_read_only_folder_mounts() -> None:
    pod = _pod()
    [container] = pod["containers"]
    assert container["command"] == ["kubedevice", "exporter"]
    args = _args(container)
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert all(m["readOnly"] is True for m in mounts.values())
    # Folders at the same path inside: the files the exporter opens are the kubelet's own.
    assert {n: m["mountPath"] for n, m in mounts.items()} == host_paths
    assert posixpath.dirname(args["podresources-socket"]) in host_paths.values()
    assert args["checkpoint"] == DEFAULT_CHECKPOINT
    assert posixpath.dirname(args["checkpoint"]) in host_paths.values()


def test_arguments_are_valid_and_the_port_is_exposed() -> None:
    [container] = _pod()["containers"]
    args = _args(container)
    assert parse_interval(args["interval"]) == 10
    host, port = parse_http_addr(args["listen"].replace("$(POD_IP)", "10.0.0.7"), "--listen")
    assert (host, port) == ("10.0.0.7", 9478)
    assert {"name": "metrics", "containerPort": port} in container["ports"]
    assert {e["name"] for e in container["env"]} == {"POD_IP"}


def test_locked_down_with_resource_limits() -> None:
    [container] = _pod()["containers"]
    security = container["securityContext"]
    assert security["privileged"] is False
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert container["resources"]["limits"]["memory"] and container["resources"]["limits"]["cpu"]
    assert container["resources"]["requests"]["memory"]
