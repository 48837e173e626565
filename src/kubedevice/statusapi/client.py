"""The status API's one client: GET (and a driver's PUT of a claim's status) over the daemon's unix socket,
and the typed calls its users make.

Used by `kubedevice status`, `pods` and `claims`, `top`, the demo, the testing kit and the SDK's
standalone backend. Asyncio only (no rich, no gRPC, nothing of the daemon): a command that asks a running
daemon loads little. Every failure is a StatusClientError whose str() is one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

from kubedevice.statusapi import contract


class StatusClientError(Exception):
    """The status API could not be reached or answered with an error; str() is one line."""


class ClaimStatusRefused(StatusClientError):
    """The daemon refused a claim's status update, as the API server would: `code` the HTTP status (400,
    403, 404, 409, 422), `reason` the Status reason (Invalid...), `causes` each field error's `field` and
    `message` (those of an Invalid answer); str() is the daemon's one line."""

    def __init__(self, message: str, code: int, reason: str, causes: list[dict[str, str]]) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.causes = causes


class StatusClient:
    """Asks the status API on `socket`; each call waits `wait` seconds at most for its answer."""

    def __init__(self, socket: Path, *, wait: float = 5.0) -> None:
        self.socket = socket
        self.wait = wait

    @classmethod
    def under(cls, root: Path, *, wait: float = 5.0) -> StatusClient:
        """The client of the daemon whose root (a DRA driver's kubelet folder) is `root`."""
        return cls(root / contract.SOCKET_NAME, wait=wait)

    async def get(self, path: str) -> bytes:
        """The body of a 200 answer to GET `path`; any other answer is an error."""
        status, body = await self.get_answer(path)
        if status != 200:
            raise StatusClientError(
                f"GET {path} failed: HTTP {status}: {body.decode(errors='replace').strip()}"
            )
        return body

    async def get_json(self, path: str) -> Any:
        """The JSON of a 200 answer to GET `path`."""
        body = await self.get(path)
        try:
            return json.loads(body)
        except ValueError:
            raise StatusClientError(
                f"{self.socket} answered {path} with something that is not JSON"
            ) from None

    async def get_node(self) -> dict[str, Any]:
        """`/node`: the node's resources, DRA drivers and name."""
        node = await self.get_json(contract.NODE)
        if not isinstance(node, dict):
            raise StatusClientError(f"{self.socket} answered {contract.NODE} with something not an object")
        return node

    async def get_node_name(self) -> str | None:
        """The node's name from `/node`, or None when the daemon names none (an older daemon)."""
        try:
            answer = json.loads(await self.get(contract.NODE))
        except ValueError:
            return None
        return contract.node_name_of(answer)

    async def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        """`/claims/<namespace>/<name>`: the claim in the resource.k8s.io/v1 shape, None when the daemon has
        no such claim (its NotFound answer)."""
        path = contract.claim_path(namespace, name)
        status, body = await self.get_answer(path)
        if status == 200:
            return _claim(body, f"GET {path}")
        error = _error_text(body)
        if status == 404 and error.startswith("no such path"):
            raise StatusClientError(
                f"the node daemon at {self.socket} serves no claims (`kubedevice node` without DRA?)"
            )
        if status == 404:
            return None
        raise StatusClientError(f"the node daemon answered GET {path} with HTTP {status}: {error}")

    async def put_claim_status(
        self, namespace: str, name: str, *, driver: str, devices: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """Write `driver`'s entries of the claim's `status.devices` (`PUT .../status?driver=`): the entries
        in the resource.k8s.io/v1 shape (driver, pool, device, shareID, conditions, data, networkData).
        They replace the driver's entries; other drivers' entries stay. Returns the claim as the daemon
        then holds it (on disk); raises ClaimStatusRefused when the daemon refuses the update."""
        path = contract.claim_status_path(namespace, name, driver)
        body = json.dumps({"devices": devices}).encode()
        status, answer = await self.request("PUT", path, body)
        if status == 200:
            return _claim(answer, f"PUT {path}")
        failure = _object(answer)
        if failure is None:
            raise StatusClientError(
                f"the node daemon answered PUT {path} with HTTP {status}: {_error_text(answer)}"
            )
        if status in (404, 405) and str(failure.get("error", "")).startswith(("no such path", "method PUT")):
            raise StatusClientError(
                f"the node daemon at {self.socket} takes no claim status (an older `kubedevice node`, or "
                "one without DRA)"
            )
        causes = (failure.get("details") or {}).get("causes") or []
        raise ClaimStatusRefused(_error_text(answer), status, str(failure.get("reason", "")), list(causes))

    async def get_answer(self, path: str) -> tuple[int, bytes]:
        """The status code and body of any answer to GET `path`.

        For callers that tell answers apart (a claim not found is not a daemon failure); an unreachable
        daemon or a malformed answer still raises StatusClientError.
        """
        return await self.request("GET", path)

    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        """The status code and body of the answer to `method path` (with `body`, JSON); an unreachable
        daemon or a malformed answer raises StatusClientError."""
        head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        try:
            async with asyncio.timeout(self.wait):
                reader, writer = await asyncio.open_unix_connection(str(self.socket))
                try:
                    writer.write((head + "\r\n").encode() + (body or b""))
                    await writer.drain()
                    raw = await reader.read()
                finally:
                    writer.close()
                    with contextlib.suppress(ConnectionError):
                        await writer.wait_closed()
        except TimeoutError:
            raise StatusClientError(f"no answer from {self.socket} within {self.wait:g}s") from None
        except OSError as err:
            raise StatusClientError(
                f"cannot reach the node daemon at {self.socket}: {err.strerror or err} "
                "(is `kubedevice node` running?)"
            ) from None
        answer_head, sep, answer = raw.partition(b"\r\n\r\n")
        status_line = answer_head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        if not sep or len(status_line) < 2 or not status_line[1].isdigit():
            raise StatusClientError(f"malformed answer from {self.socket}")
        return int(status_line[1]), answer


def _object(body: bytes) -> dict[str, Any] | None:
    """The JSON object of an answer's body, or None."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _claim(body: bytes, request: str) -> dict[str, Any]:
    """The claim a 200 answer to `request` holds."""
    claim = _object(body)
    if claim is None:
        raise StatusClientError(f"the node daemon answered {request} with something not a claim")
    return claim


def _error_text(body: bytes) -> str:
    """The `error` of the daemon's JSON error answer, else the body as text."""
    text = body.decode(errors="replace").strip()
    with contextlib.suppress(ValueError):
        data = json.loads(text)
        if isinstance(data, dict) and isinstance(data.get("error"), str):
            return str(data["error"])
    return text
