"""The status API's contract: claim routes built and read back (quoting included), what `/node` names,
the NotFound answer and the answer of a claim route."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubedevice.statusapi import contract
from kubedevice.statusapi.paths import NodePaths


def test_the_socket_is_kubedevice_sock_in_the_root() -> None:
    assert contract.SOCKET_NAME == "kubedevice.sock"
    assert NodePaths.under(Path("/r")).status_socket == Path("/r/kubedevice.sock")


@pytest.mark.parametrize(
    ("namespace", "name", "path"),
    [
        ("default", "c1", "/claims/default/c1"),
        # A `/` or a space inside a part is quoted, so it cannot split the route or end the request line.
        ("team a", "gpu/claim", "/claims/team%20a/gpu%2Fclaim"),
        ("ns", "name?x=1#y", "/claims/ns/name%3Fx%3D1%23y"),
        ("ns", "naïve", "/claims/ns/na%C3%AFve"),
    ],
)
def test_a_claim_path_is_quoted_and_reads_back(namespace: str, name: str, path: str) -> None:
    assert contract.claim_path(namespace, name) == path
    rest = path.removeprefix(contract.CLAIM_PREFIX)
    assert contract.parse_claim_path(rest) == (namespace, name)


@pytest.mark.parametrize("rest", ["c1", "default/", "/c1", "default/c1/extra", ""])
def test_a_path_that_names_no_claim_parses_to_none(rest: str) -> None:
    assert contract.parse_claim_path(rest) is None


def test_the_node_answer_names_the_node() -> None:
    assert contract.node_answer("node-1") == {"nodeName": "node-1"}
    assert contract.node_name_of({"nodeName": "node-1", "resources": {}}) == "node-1"


@pytest.mark.parametrize("answer", [{}, {"nodeName": ""}, {"nodeName": 7}, ["nodeName"], None, "node-1"])
def test_an_answer_without_a_node_name_names_none(answer: object) -> None:
    assert contract.node_name_of(answer) is None


def test_the_not_found_answer_is_the_api_servers() -> None:
    text = 'resourceclaims.resource.k8s.io "c1" not found'
    assert contract.claim_not_found_text("c1") == text
    assert contract.claim_not_found("c1") == {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": "NotFound",
        "code": 404,
        "error": text,
        "message": text,
    }


def test_a_claim_route_answers_the_claim_not_found_or_no_such_path() -> None:
    claims: dict[tuple[str, str], dict[str, Any]] = {("team a", "c/1"): {"metadata": {"name": "c/1"}}}

    def lookup(namespace: str, name: str) -> dict[str, Any] | None:
        return claims.get((namespace, name))

    assert contract.answer_claim("team%20a/c%2F1", lookup) == ({"metadata": {"name": "c/1"}}, 200)
    assert contract.answer_claim("default/c%2F2", lookup) == (contract.claim_not_found("c/2"), 404)
    # The status subresource reads the claim too, as the API server's GET of it does.
    assert contract.answer_claim("team%20a/c%2F1/status", lookup) == ({"metadata": {"name": "c/1"}}, 200)
    for rest in ("c1", "default/c1/spec", "default//status", "a/b/c/d"):
        assert contract.answer_claim(rest, lookup) == (
            {
                "error": f"no such path /claims/{rest}; try /claims/<namespace>/<name> or "
                "/claims/<namespace>/<name>/status"
            },
            404,
        )


def test_a_status_path_is_built_quoted_and_read_back_only_as_the_status_subresource() -> None:
    path = contract.claim_status_path("team a", "c/1", "gpu.example.com")
    assert path == "/claims/team%20a/c%2F1/status?driver=gpu.example.com"
    rest = path.removeprefix(contract.CLAIM_PREFIX).partition("?")[0]
    assert contract.parse_claim_path(rest, status=True) == ("team a", "c/1")
    assert contract.parse_claim_path(rest, status=False) is None
    assert contract.parse_claim_path("team%20a/c%2F1", status=True) is None
