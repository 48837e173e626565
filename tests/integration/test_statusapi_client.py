"""The status API's client against real servers on a unix socket: its typed calls, and the one line each
failure reads as (no daemon, no answer, a malformed or unexpected answer, a daemon without claims)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kubedevice.statusapi import contract
from kubedevice.statusapi.client import StatusClient, StatusClientError
from kubedevice.statusapi.http import Handler, PrefixHandler, PutRequest, Response, StatusServer
from kubedevice.statusapi.stand_in import StandInStatusAPI

CLAIM: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {}}
NOT_FOUND = (
    b'{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, '
    b'"error": "resourceclaims.resource.k8s.io \\"gone\\" not found", '
    b'"message": "resourceclaims.resource.k8s.io \\"gone\\" not found"}\n'
)

Serve = Callable[[dict[str, Handler], dict[str, PrefixHandler]], Awaitable[StatusClient]]


@pytest.fixture
async def serve(root: Path) -> AsyncIterator[Serve]:
    """Starts a status server with these routes and prefixes in `root`; the client of its socket."""
    servers: list[StatusServer] = []

    async def start(routes: dict[str, Handler], prefixes: dict[str, PrefixHandler]) -> StatusClient:
        server = StatusServer(routes, prefixes)
        await server.start(root / contract.SOCKET_NAME)
        servers.append(server)
        return StatusClient.under(root)

    yield start
    for server in servers:
        await server.stop()


def _claims(rest: str) -> Response:
    """The daemon's claims route over one claim, default/c1."""
    return Response.json(*contract.answer_claim(rest, _lookup))


def _lookup(namespace: str, name: str) -> dict[str, Any] | None:
    return CLAIM if (namespace, name) == ("default", "c1") else None


async def failure(call: Awaitable[object]) -> str:
    with pytest.raises(StatusClientError) as err:
        await call
    return str(err.value)


async def test_typed_calls_read_the_daemons_answers(serve: Serve) -> None:
    node = {"nodeName": "node-1", "resources": {}}
    daemon = await serve({"/node": lambda: Response.json(node)}, {"/claims/": _claims})
    assert await daemon.get_node() == node
    assert await daemon.get_node_name() == "node-1"
    assert await daemon.get_json("/node") == node
    assert await daemon.get("/node") == b'{"nodeName": "node-1", "resources": {}}\n'
    assert await daemon.get_claim("default", "c1") == CLAIM
    assert await daemon.get_claim("default", "gone") is None
    assert await daemon.get_answer("/claims/default/gone") == (404, NOT_FOUND)


async def test_an_answer_that_is_an_error_is_one_line(serve: Serve) -> None:
    daemon = await serve({"/text": lambda: Response.text("ok\n"), "/list": lambda: Response.json([1])}, {})
    socket = daemon.socket
    assert await failure(daemon.get("/nope")) == (
        'GET /nope failed: HTTP 404: {"error": "no such path /nope; try /list, /text"}'
    )
    assert await failure(daemon.get_node()) == (
        'GET /node failed: HTTP 404: {"error": "no such path /node; try /list, /text"}'
    )
    assert (
        await failure(daemon.get_json("/text")) == f"{socket} answered /text with something that is not JSON"
    )


async def test_answers_that_are_not_what_was_asked_for(serve: Serve) -> None:
    daemon = await serve(
        {"/node": lambda: Response.json(["node-1"])},
        {
            "/claims/default/": lambda rest: (
                Response.json({"error": "state unreadable"}, 500)
                if rest == "broken"
                else Response.json([CLAIM])
            )
        },
    )
    assert await failure(daemon.get_claim("default", "broken")) == (
        "the node daemon answered GET /claims/default/broken with HTTP 500: state unreadable"
    )
    assert await failure(daemon.get_claim("default", "odd")) == (
        "the node daemon answered GET /claims/default/odd with something not a claim"
    )
    assert await failure(daemon.get_node()) == f"{daemon.socket} answered /node with something not an object"
    assert await daemon.get_node_name() is None


async def test_a_daemon_without_claims_or_a_node_name(serve: Serve) -> None:
    daemon = await serve({"/node": lambda: Response.json({"resources": {}})}, {})
    assert await failure(daemon.get_claim("default", "c1")) == (
        f"the node daemon at {daemon.socket} serves no claims (`kubedevice node` without DRA?)"
    )
    assert await daemon.get_node_name() is None


async def test_no_daemon_no_answer_and_a_malformed_answer(root: Path) -> None:
    socket = root / contract.SOCKET_NAME
    daemon = StatusClient(socket, wait=0.2)
    assert await failure(daemon.get("/node")) == (
        f"cannot reach the node daemon at {socket}: No such file or directory (is `kubedevice node` running?)"
    )

    hold = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await hold.wait()
        writer.close()

    server = await asyncio.start_unix_server(silent, path=str(socket))
    try:
        assert await failure(daemon.get("/node")) == f"no answer from {socket} within 0.2s"
    finally:
        hold.set()
        server.close()
        await server.wait_closed()
    socket.unlink()

    async def garbled(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"SSH-2.0-OpenSSH\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_unix_server(garbled, path=str(socket))
    try:
        assert await failure(daemon.get_claim("default", "c1")) == f"malformed answer from {socket}"
    finally:
        server.close()
        await server.wait_closed()


async def test_the_stand_in_serves_claims_as_the_daemon_does(root: Path) -> None:
    stand_in = StandInStatusAPI(root, "node-7")
    stand_in.put_claim("team a", "gpu/claim", lambda: CLAIM)
    await stand_in.start()
    try:
        daemon = StatusClient.under(root)
        assert await daemon.get_node_name() == "node-7"
        stand_in.node_name = "node-8"
        assert await daemon.get_json("/node") == {"nodeName": "node-8"}
        assert await daemon.get_claim("team a", "gpu/claim") == CLAIM
        assert await daemon.get_claim("team a", "gone") is None
        assert await daemon.get_answer("/claims/team%20a/gone") == (404, NOT_FOUND)
    finally:
        await stand_in.stop()


async def test_a_put_reads_its_body_and_refuses_one_without_a_length_or_too_large(root: Path) -> None:
    """The server's PUT: the body read whole (after `100 Continue` when asked, as curl asks), the query's
    parameters; no Content-Length is 411, more than the API server's 3 MiB is 413 (never read)."""
    seen: list[PutRequest] = []

    async def echo(request: PutRequest) -> Response:
        seen.append(request)
        return Response.json({"rest": request.rest, "driver": request.query.get("driver")})

    server = StatusServer({}, {}, {"/claims/": echo})
    await server.start(root / contract.SOCKET_NAME)
    try:
        body = b'{"devices": []}'
        status, answer = await StatusClient.under(root).request(
            "PUT", "/claims/a/b/status?driver=d.example", body
        )
        assert (status, json.loads(answer)) == (200, {"rest": "a/b/status", "driver": "d.example"})
        assert seen[-1].body == body
        head = (
            "PUT /claims/a/b/status HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"
        )
        assert await _raw(root, head.encode(), b"{}") == (b"HTTP/1.1 100 Continue", b"HTTP/1.1 200 OK")
        assert seen[-1].body == b"{}"
        no_length = b"PUT /claims/a/b/status HTTP/1.1\r\nHost: x\r\n\r\n"
        assert (await _raw(root, no_length))[0].startswith(b"HTTP/1.1 411 ")
        huge = b"PUT /claims/a/b/status HTTP/1.1\r\nHost: x\r\nContent-Length: 3145729\r\n\r\n"
        assert (await _raw(root, huge))[0].startswith(b"HTTP/1.1 413 ")
        assert len(seen) == 2
    finally:
        await server.stop()


async def _raw(root: Path, head: bytes, body: bytes = b"") -> tuple[bytes, ...]:
    """The status lines of the server's answer to `head`, then `body` once it asked for it (or at once)."""
    reader, writer = await asyncio.open_unix_connection(str(root / contract.SOCKET_NAME))
    writer.write(head)
    await writer.drain()
    lines: list[bytes] = []
    if b"Expect: 100-continue" in head:
        lines.append((await reader.readuntil(b"\r\n\r\n")).split(b"\r\n")[0])
    writer.write(body)
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return (*lines, answer.split(b"\r\n")[0])
