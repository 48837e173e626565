"""deploy/: the DaemonSet mounts what the SDK expects, locked down, and the image runs the plugin CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kubedevice.plugin import DEFAULT_PLUGIN_DIR, DEFAULT_REGISTRY_DIR
from kubedevice.plugin.cli import PLUGIN_DIR_ENV

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def load_daemonset() -> dict[str, Any]:
    documents = list(yaml.safe_load_all((DEPLOY / "daemonset.yaml").read_text()))
    assert len(documents) == 1
    document: dict[str, Any] = documents[0]
    assert (document["apiVersion"], document["kind"]) == ("apps/v1", "DaemonSet")
    return document


def test_host_paths_are_mounted_at_the_sdk_defaults() -> None:
    pod = load_daemonset()["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    # Same path inside and outside: the kubelet joins the socket name to *its* directory.
    assert mounts == host_paths
    assert set(mounts.values()) == {DEFAULT_PLUGIN_DIR, DEFAULT_REGISTRY_DIR}
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env[PLUGIN_DIR_ENV] == DEFAULT_PLUGIN_DIR


def test_the_pod_is_locked_down_and_node_critical() -> None:
    pod = load_daemonset()["spec"]["template"]["spec"]
    security = pod["containers"][0]["securityContext"]
    assert security["privileged"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert "add" not in security["capabilities"]
    assert pod["priorityClassName"] == "system-node-critical"
    assert {"operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    selector = load_daemonset()["spec"]["selector"]["matchLabels"]
    assert selector.items() <= load_daemonset()["spec"]["template"]["metadata"]["labels"].items()


def test_image_runs_the_plugin_cli() -> None:
    lines = [line.strip() for line in (DEPLOY / "Dockerfile").read_text().splitlines()]
    assert "FROM python:3.11-slim" in lines
    assert 'ENTRYPOINT ["kubedevice", "plugin"]' in lines
    assert any(line.startswith("RUN pip install .") for line in lines)
    args = load_daemonset()["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] in {"fake", "paths"}
