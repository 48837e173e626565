"""deploy/: every manifest is a valid object of its kind, the plugin DaemonSets mount exactly what the SDK
reads and writes (the rest of the root read-only), and the images run the plugin CLI or the user's script."""

from __future__ import annotations

import posixpath
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubedevice.api.constants import DEVICE_PLUGIN_PATH, PLUGIN_DIR_ENV, PLUGINS_REGISTRY_PATH
from kubedevice.plugin import DEFAULT_PLUGIN_DIR, DEFAULT_REGISTRY_DIR, DevicePlugin
from kubedevice.plugin.cdi import DEFAULT_SPEC_DIR, DEFAULT_SPEC_DIRS
from kubedevice.plugin.dra.paths import DEFAULT_KUBELET_DIR, cdi_spec_dir

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
MANIFESTS = sorted([*DEPLOY.glob("*.yaml"), *DEPLOY.glob("*.yml")])
#: The DaemonSets that run a device plugin (the exporter's is checked in test_exporter_deploy.py).
PLUGIN_DAEMONSETS = ("daemonset.yaml", "sdk-plugin-daemonset.yaml")

#: apiVersion of each kind a manifest here may hold.
API_VERSIONS = {
    "DaemonSet": "apps/v1",
    "ServiceAccount": "v1",
    "ConfigMap": "v1",
    "ClusterRole": "rbac.authorization.k8s.io/v1",
    "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
    "Namespace": "v1",
}
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
HOST_PATH_TYPES = {"", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice",
                   "BlockDevice"}  # fmt: skip
TOLERATION_EFFECTS = {None, "NoSchedule", "PreferNoSchedule", "NoExecute"}


def documents() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in MANIFESTS:
        for number, document in enumerate(yaml.safe_load_all(path.read_text(encoding="utf-8"))):
            if document is not None:
                found.append((f"{path.name}#{number}", document))
    return found


DOCUMENTS = documents()


def load(name: str) -> dict[str, Any]:
    [document] = [d for where, d in DOCUMENTS if where.startswith(f"{name}#")]
    return document


def pod_spec(name: str) -> dict[str, Any]:
    spec: dict[str, Any] = load(name)["spec"]["template"]["spec"]
    return spec


def is_label_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    return (not prefix or (len(prefix) <= 253 and bool(DNS_SUBDOMAIN.fullmatch(prefix)))) and bool(
        0 < len(name) <= 63 and re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", name)
    )


def check_metadata(metadata: dict[str, Any], where: str, *, named: bool = True) -> None:
    name = metadata.get("name")
    if named or name is not None:
        assert isinstance(name, str) and len(name) <= 253 and DNS_SUBDOMAIN.fullmatch(name), (where, name)
    if "namespace" in metadata:
        assert DNS_LABEL.fullmatch(metadata["namespace"]), (where, metadata["namespace"])
    for key, value in (metadata.get("labels") or {}).items():
        assert is_label_key(key), (where, key)
        assert isinstance(value, str) and len(value) <= 63 and LABEL_VALUE.fullmatch(value), (where, value)
    for key, value in (metadata.get("annotations") or {}).items():
        assert is_label_key(key) and isinstance(value, str), (where, key, value)


def check_container(container: dict[str, Any], volumes: set[str], where: str) -> None:
    where = f"{where} container {container.get('name')!r}"
    assert DNS_LABEL.fullmatch(container["name"]) and len(container["name"]) <= 63, where
    assert isinstance(container.get("image"), str) and container["image"].strip(), f"{where}: no image"
    for key in ("command", "args"):
        assert all(isinstance(a, str) for a in container.get(key, [])), (where, key)
    for env in container.get("env", []):
        assert isinstance(env["name"], str) and env["name"], (where, env)
        assert ("value" in env) != ("valueFrom" in env), (where, env)
        assert isinstance(env.get("value", ""), str), (where, env)
    port_names = [p.get("name") for p in container.get("ports", []) if "name" in p]
    assert len(port_names) == len(set(port_names)), where
    for port in container.get("ports", []):
        assert isinstance(port["containerPort"], int) and 0 < port["containerPort"] < 65536, (where, port)
        assert "name" not in port or (len(port["name"]) <= 15 and DNS_LABEL.fullmatch(port["name"])), where
    mounts = container.get("volumeMounts", [])
    paths = [m["mountPath"] for m in mounts]
    assert len(paths) == len(set(paths)), f"{where}: a mount path is used twice: {paths}"
    for mount in mounts:
        assert mount["name"] in volumes, f"{where}: volumeMount {mount['name']!r} names no volume"
        assert posixpath.isabs(mount["mountPath"]), (where, mount)
        assert isinstance(mount.get("readOnly", False), bool), (where, mount)


def check_daemonset(document: dict[str, Any], where: str) -> None:
    spec = document["spec"]
    selector = spec["selector"]["matchLabels"]
    template = spec["template"]
    assert selector, f"{where}: empty selector"
    assert selector.items() <= template["metadata"]["labels"].items(), f"{where}: selector misses the pods"
    check_metadata(template["metadata"], f"{where} template", named=False)
    assert spec.get("updateStrategy", {}).get("type", "RollingUpdate") in {"RollingUpdate", "OnDelete"}
    pod = template["spec"]
    volumes = [v["name"] for v in pod.get("volumes", [])]
    assert len(volumes) == len(set(volumes)), f"{where}: a volume name is used twice"
    for volume in pod.get("volumes", []):
        assert DNS_LABEL.fullmatch(volume["name"]), (where, volume)
        if "hostPath" in volume:
            host_path = volume["hostPath"]
            assert posixpath.isabs(host_path["path"]), f"{where}: hostPath {host_path['path']!r} is relative"
            assert host_path.get("type", "") in HOST_PATH_TYPES, (where, host_path)
    assert pod["containers"], f"{where}: no container"
    names = [c["name"] for c in pod["containers"]]
    assert len(names) == len(set(names)), where
    for container in pod["containers"]:
        check_container(container, set(volumes), where)
    for toleration in pod.get("tolerations", []):
        assert toleration.get("operator", "Equal") in {"Exists", "Equal"}, (where, toleration)
        assert toleration.get("effect") in TOLERATION_EFFECTS, (where, toleration)
        assert toleration.get("operator") != "Exists" or "value" not in toleration, (where, toleration)
    for key, value in (pod.get("nodeSelector") or {}).items():
        assert is_label_key(key) and isinstance(value, str), (where, key, value)


def test_deploy_holds_manifests() -> None:
    assert {p.name for p in MANIFESTS} >= {*PLUGIN_DAEMONSETS, "exporter-daemonset.yaml"}


@pytest.mark.parametrize(("where", "document"), DOCUMENTS, ids=[w for w, _ in DOCUMENTS])
def test_every_manifest_is_a_valid_object_of_its_kind(where: str, document: dict[str, Any]) -> None:
    kind = document.get("kind")
    assert kind in API_VERSIONS, f"{where}: kind {kind!r} is not one this test knows"
    assert document.get("apiVersion") == API_VERSIONS[kind], where
    check_metadata(document.get("metadata") or {}, where)
    if kind == "DaemonSet":
        check_daemonset(document, where)


def test_the_validation_refuses_what_the_api_server_would() -> None:
    good = load("sdk-plugin-daemonset.yaml")
    broken = yaml.safe_load(yaml.safe_dump(good))
    broken["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["name"] = "no-such-volume"
    with pytest.raises(AssertionError, match="names no volume"):
        check_daemonset(broken, "broken")
    broken = yaml.safe_load(yaml.safe_dump(good))
    broken["spec"]["template"]["spec"]["volumes"][0]["hostPath"]["path"] = "var/lib/kubelet"
    with pytest.raises(AssertionError, match="is relative"):
        check_daemonset(broken, "broken")
    broken = yaml.safe_load(yaml.safe_dump(good))
    broken["spec"]["selector"]["matchLabels"] = {"app": "other"}
    with pytest.raises(AssertionError, match="selector misses the pods"):
        check_daemonset(broken, "broken")
    broken = yaml.safe_load(yaml.safe_dump(good))
    del broken["spec"]["template"]["spec"]["containers"][0]["image"]
    with pytest.raises(AssertionError, match="no image"):
        check_daemonset(broken, "broken")


@pytest.mark.parametrize("name", PLUGIN_DAEMONSETS)
def test_plugin_mounts_are_the_sdk_paths_and_only_they_are_writable(name: str) -> None:
    pod = pod_spec(name)
    (container,) = pod["containers"]
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    # Same path inside and outside: the kubelet joins the socket name to *its* directory, the runtime
    # reads CDI specs from *its* folders.
    assert all(host_paths[m["name"]] == path for path, m in mounts.items()), (mounts, host_paths)
    plugin_dir = DEVICE_PLUGIN_PATH.rstrip("/")
    assert plugin_dir == DEFAULT_PLUGIN_DIR
    assert plugin_dir in mounts and not mounts[plugin_dir].get("readOnly", False)
    env = {e["name"]: e["value"] for e in container.get("env", [])}
    assert env.get(PLUGIN_DIR_ENV, plugin_dir) == plugin_dir
    # The CDI folder the SDK writes a plugin's spec into by default in a pod, which the runtimes read.
    cdi = str(DEFAULT_SPEC_DIR)
    default = cdi_spec_dir(DevicePlugin.cdi_spec_dir, Path(DEFAULT_KUBELET_DIR), cluster=True)
    assert default == DEFAULT_SPEC_DIR and DEFAULT_SPEC_DIR in DEFAULT_SPEC_DIRS
    assert cdi in mounts and mounts[cdi].get("readOnly", False) is False
    args = container.get("args", [])
    if "--cdi-spec-dir" in args:
        assert args[args.index("--cdi-spec-dir") + 1] == cdi
    if "--plugin-watcher" in args:
        assert PLUGINS_REGISTRY_PATH.rstrip("/") in mounts
    writable = {path for path, m in mounts.items() if not m.get("readOnly", False)}
    assert writable <= {plugin_dir, DEFAULT_REGISTRY_DIR, cdi}, writable
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


@pytest.mark.parametrize("name", PLUGIN_DAEMONSETS)
def test_the_plugin_pod_is_locked_down_and_node_critical(name: str) -> None:
    pod = pod_spec(name)
    security = pod["containers"][0]["securityContext"]
    assert security["privileged"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert "add" not in security["capabilities"]
    assert pod["priorityClassName"] == "system-node-critical"
    assert {"operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]


def dockerfile(name: str) -> list[tuple[str, str]]:
    """(instruction, rest) per instruction of a deploy/ Dockerfile (continuation lines joined)."""
    text = re.sub(r"\\\n", " ", (DEPLOY / name).read_text(encoding="utf-8"))
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            instruction, _, rest = line.partition(" ")
            found.append((instruction.upper(), rest.strip()))
    return found


@pytest.mark.parametrize("name", ["Dockerfile", "Dockerfile.plugin"])
def test_what_the_images_copy_exists_in_the_build_context(name: str) -> None:
    # The build context is the repository root (`docker build -f deploy/NAME .`); ARGs at their defaults.
    args: dict[str, str] = {}
    copied: set[str] = set()
    for instruction, rest in dockerfile(name):
        if instruction == "ARG":
            key, _, default = rest.partition("=")
            args[key] = default.strip('"')
        if instruction == "COPY" and not rest.startswith("--from"):
            *sources, _ = shlex.split(re.sub(r"\$\{?(\w+)\}?", lambda m: args[m[1]], rest))
            for source in sources:
                assert (REPO / source).exists(), f"{name}: COPY {source}: not in the build context"
            copied.update(sources)
    # What building kubedevice reads (pyproject.toml names README.md as readme and LICENSE as licence file).
    assert {"pyproject.toml", "README.md", "LICENSE", "src"} <= copied, f"{name} copies only {sorted(copied)}"
    assert [r for i, r in dockerfile(name) if i == "FROM"][-1].startswith("python:3.11-slim")


def test_the_builtin_image_runs_the_plugin_cli() -> None:
    instructions = dockerfile("Dockerfile")
    assert ("ENTRYPOINT", '["kubedevice", "plugin"]') in instructions
    assert any(i == "RUN" and r.startswith("pip install .") for i, r in instructions)
    args = pod_spec("daemonset.yaml")["containers"][0]["args"]
    assert args[0] in {"fake", "paths"}


def test_the_sdk_plugin_image_runs_the_users_script_with_the_daemonsets_arguments() -> None:
    instructions = dockerfile("Dockerfile.plugin")
    plugin_arg = next(r for i, r in instructions if i == "ARG" and r.startswith("PLUGIN="))
    assert (REPO / plugin_arg.removeprefix("PLUGIN=")).is_file()
    copied = next(r for i, r in instructions if i == "COPY" and r.startswith("${PLUGIN}"))
    target = copied.split()[-1]
    assert ("ENTRYPOINT", f'["python", "{target}"]') in instructions
    assert any(i == "RUN" and "pip install /wheels/kubedevice-" in r for i, r in instructions)
    # The example's --root is the read-only hardware mount.
    (container,) = pod_spec("sdk-plugin-daemonset.yaml")["containers"]
    root = container["args"][container["args"].index("--root") + 1]
    [hardware] = [m for m in container["volumeMounts"] if m["mountPath"] == root]
    assert hardware["readOnly"] is True
