"""deploy/dra-daemonset.yaml: the RBAC a DRA driver needs and no more, and a DaemonSet that mounts what
the SDK's DRA face reads and writes, gives it its node name and runs in cluster mode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "dra-daemonset.yaml"
KUBELET_DIR = "/var/lib/kubelet"


def objects() -> dict[str, dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(MANIFEST.read_text(encoding="utf-8")) if d is not None]
    by_kind = {d["kind"]: d for d in docs}
    assert len(by_kind) == len(docs) == 4
    return by_kind


def test_the_cluster_role_grants_exactly_what_the_backend_calls() -> None:
    role = objects()["ClusterRole"]
    assert role["apiVersion"] == "rbac.authorization.k8s.io/v1"
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    slice_verbs = ("get", "list", "watch", "create", "update", "patch", "delete")
    assert granted == {
        ("resource.k8s.io", "resourceclaims", "get"),
        ("resource.k8s.io", "resourceclaims", "list"),
        ("resource.k8s.io", "resourceclaims/status", "update"),
        ("resource.k8s.io", "resourceclaims/driver", "associated-node:update"),
        *(("resource.k8s.io", "resourceslices", verb) for verb in slice_verbs),
        ("", "nodes", "get"),
    }


def test_the_binding_ties_the_role_to_the_daemonsets_service_account() -> None:
    found = objects()
    account, binding, daemonset = found["ServiceAccount"], found["ClusterRoleBinding"], found["DaemonSet"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": found["ClusterRole"]["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": account["metadata"]["name"],
            "namespace": account["metadata"]["namespace"],
        }
    ]
    assert daemonset["metadata"]["namespace"] == account["metadata"]["namespace"]
    assert daemonset["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]


def test_the_daemonset_mounts_the_dra_paths_writable_and_names_the_node() -> None:
    pod = objects()["DaemonSet"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    # Same path inside and outside: the kubelet dials the socket path the plugin reports.
    assert mounts == host_paths
    assert set(mounts.values()) == {
        f"{KUBELET_DIR}/plugins_registry",
        f"{KUBELET_DIR}/plugins",
        "/var/run/cdi",
    }
    assert not any(m.get("readOnly") for m in container["volumeMounts"])
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["KUBEDEVICE_KUBELET_DIR"]["value"] == KUBELET_DIR
    args = container["args"]
    assert args[0] == "fake"
    assert args[args.index("--api") + 1] == "dra"
    assert args[args.index("--driver") + 1] == "gpu.example.com"
    security = container["securityContext"]
    assert security["privileged"] is False and security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
