"""A real daemon fed names a hostile user writes (issue 35): refused with their line, nothing else harmed."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.node_helpers import NodeProcesses, node_processes, pod_manifest, run_cli, wait_for

GPU = "example.com/gpu"


@pytest.fixture
def node() -> Iterator[NodeProcesses]:
    yield from node_processes()


def _json_pod(name: str, container: str) -> str:
    # By hand: the daemon must read the JSON escape `\ud800`, which the json module makes a lone surrogate.
    return (
        f'{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{name}"}}, "spec": {{"containers": '
        f'[{{"name": "{container}", "resources": {{"limits": {{"{GPU}": 1}}}}}}]}}}}'
    )


def test_lone_surrogates_and_escape_bytes_are_refused_and_the_rest_runs(node: NodeProcesses) -> None:
    node.start_daemon()
    node.start_plugin(GPU, 2)
    node.wait_capacity(GPU, 2, 2)
    node.write_manifest("surrogate-pod.json", _json_pod("a\\ud800", "main"))
    node.write_manifest("surrogate-container.json", _json_pod("b", "c\\ud800"))
    red = "\x1b[31mred.yaml"
    # YAML holds no raw ESC; its `\e` escape makes one.
    node.write_manifest(red, pod_manifest('"esc\\e[31m"', {GPU: 1}))
    node.write_manifest("good.yaml", pod_manifest("good", {GPU: 1}))
    node.wait_phase("good", "Running")
    expected = {
        "surrogate-pod.json": "metadata.name: 'a\\ud800' is not valid UTF-8 (a lone surrogate)",
        "surrogate-container.json": (
            "spec.containers[0].name: 'c\\ud800' is not valid UTF-8 (a lone surrogate)"
        ),
        red: "pod: metadata.name: 'esc\\x1b[31m' is not a DNS subdomain",
    }

    def reported() -> dict[str, str] | None:
        errors = node.manifest_errors()
        return errors if set(expected) <= set(errors) else None

    errors = wait_for(reported, "the three refused manifests to be reported")
    for file, why in expected.items():
        assert why in errors[file], (file, errors[file])
    assert [p["name"] for p in node.pods()] == ["good"]

    sock = str(node.paths.pod_resources_socket)
    listed = run_cli("podresources", "list", "--socket", sock, "--json")
    assert listed.returncode == 0, listed.stderr
    assert [p["name"] for p in json.loads(listed.stdout)["podResources"]] == ["good"]
    pods = run_cli("pods", "--root-dir", str(node.root), "--json")
    assert pods.returncode == 0, pods.stderr
    assert [p["name"] for p in json.loads(pods.stdout)["pods"]] == ["good"]

    log = node.log("daemon")
    assert "\x1b" not in log
    assert "manifest \\x1b[31mred.yaml: pod: metadata.name: 'esc\\x1b[31m' is not a DNS subdomain" in log
    assert "Traceback" not in log
