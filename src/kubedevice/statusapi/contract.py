"""The status API's contract: the socket's name, the routes, how a claim's route (and its status
subresource's) is built and read, what `/node` answers at least, and the API server's failure answers (a
Status: NotFound for a claim, Invalid for a refused status update...).

The daemon serves it, the CLI, `top`, the SDK's standalone backend and the testing kit ask it, and the
stand-in kubelets of conformance and the kit serve its claims part (:mod:`.stand_in`). Plain data and
text, no I/O: the daemon's paths import it before anything is served.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, unquote, urlencode

#: The status socket's name in the daemon's root, which is the kubelet folder a DRA driver is given.
SOCKET_NAME = "kubedevice.sock"

NODE = "/node"
PODS = "/pods"
CLAIMS = "/claims"
#: `/claims/<namespace>/<name>`: one claim in the resource.k8s.io/v1 shape, as an API server returns it.
CLAIM_PREFIX = "/claims/"
#: `/claims/<namespace>/<name>/status`: the claim's status subresource; GET reads the claim, PUT
#: `{"devices": [...]}` with `?driver=<name>` writes that driver's `status.devices` entries.
STATUS_SUBRESOURCE = "status"
#: The query parameter of a status PUT naming the driver that writes.
DRIVER_PARAMETER = "driver"
RESOURCESLICES = "/resourceslices"
METRICS = "/metrics"
HEALTHZ = "/healthz"

#: The node's name in `/node`, which a standalone DRA driver names its pool after.
NODE_NAME_FIELD = "nodeName"
#: The node's labels in `/node` (`kubernetes.io/hostname` and `--node-labels`).
NODE_LABELS_FIELD = "nodeLabels"

#: A claim's `preparedState` in `/claims`, the words of the claims table's "prepared" column: prepared in
#: this run of the daemon, restored from the DRA checkpoint (its pods run with its devices; the driver was
#: not called again), or neither.
PREPARED = "yes"
RESTORED = "restored"
NOT_PREPARED = "no"

#: Finds a claim's answer by namespace and name; None when there is no such claim.
ClaimLookup = Callable[[str, str], dict[str, Any] | None]


def claim_path(namespace: str, name: str) -> str:
    """`/claims/<namespace>/<name>`, each part URL-encoded whole (a `/` in a name cannot split it)."""
    return f"{CLAIM_PREFIX}{quote(namespace, safe='')}/{quote(name, safe='')}"


def claim_status_path(namespace: str, name: str, driver: str) -> str:
    """`/claims/<namespace>/<name>/status?driver=<driver>`: where `driver` PUTs its entries."""
    return f"{claim_path(namespace, name)}/{STATUS_SUBRESOURCE}?{urlencode({DRIVER_PARAMETER: driver})}"


def parse_claim_path(rest: str, *, status: bool | None = None) -> tuple[str, str] | None:
    """The namespace and name of `/claims/<rest>` (`rest` still URL-encoded), or None when it names none.

    `status`: True wants the status subresource (`<ns>/<name>/status`), False the claim, None either."""
    parts = rest.split("/")
    if len(parts) == 3 and parts[2] == STATUS_SUBRESOURCE and status is not False:
        parts = parts[:2]
    elif len(parts) != 2 or status:
        return None
    if not all(parts):
        return None
    return unquote(parts[0]), unquote(parts[1])


def prepared_state(prepared: bool, cached: bool) -> str:
    """A claim's `preparedState` from its `prepared` (in this run) and `cached` (in the DRA manager's
    cache): what the table shows and what a script reads, one vocabulary."""
    if prepared:
        return PREPARED
    return RESTORED if cached else NOT_PREPARED


def node_answer(node_name: str, node_labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What `/node` answers at least: the node's name (and its labels, when known). The daemon adds its
    resources and DRA drivers."""
    answer: dict[str, Any] = {NODE_NAME_FIELD: node_name}
    if node_labels is not None:
        answer[NODE_LABELS_FIELD] = dict(sorted(node_labels.items()))
    return answer


def node_name_of(answer: object) -> str | None:
    """The node's name in a `/node` answer, or None when it names none (an older daemon)."""
    name = answer.get(NODE_NAME_FIELD) if isinstance(answer, dict) else None
    return name if isinstance(name, str) and name else None


def claim_not_found_text(name: str) -> str:
    """The API server's text for a claim it does not have, as the kubelet and a driver pass it on."""
    return f'resourceclaims.resource.k8s.io "{name}" not found'


def failure(
    code: int, reason: str, message: str, causes: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    """The API server's failure Status (`reason` NotFound, Invalid, Forbidden...), with `error` (the same
    one line as `message`) that every refusal of the status API carries; `causes` are the field errors."""
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": reason,
        "code": code,
        "error": message,
        "message": message,
    }
    if causes:
        status["details"] = {"causes": causes}
    return status


def claim_not_found(name: str) -> dict[str, Any]:
    """The API server's NotFound Status for a claim (answered with HTTP 404)."""
    return failure(404, "NotFound", claim_not_found_text(name))


def no_such_claim_path(rest: str) -> dict[str, Any]:
    """The answer to `/claims/<rest>` that names no claim (HTTP 404)."""
    return {
        "error": f"no such path {CLAIM_PREFIX}{rest}; try {CLAIM_PREFIX}<namespace>/<name> or "
        f"{CLAIM_PREFIX}<namespace>/<name>/{STATUS_SUBRESOURCE}"
    }


def answer_claim(rest: str, lookup: ClaimLookup) -> tuple[dict[str, Any], int]:
    """What `/claims/<rest>` answers, and its HTTP status: the claim `lookup` finds, else NotFound."""
    where = parse_claim_path(rest)
    if where is None:
        return no_such_claim_path(rest), 404
    claim = lookup(*where)
    return (claim, 200) if claim is not None else (claim_not_found(where[1]), 404)
