"""The status API's small HTTP/1.1 server, over a unix socket and optionally TCP (its client is
:mod:`.client`).

GET (and HEAD) without a body, and PUT with one (a body of `Content-Length` bytes, at most the API server's
3 MiB); each response closes the connection. GET handlers are plain functions run on the loop, so they read
the daemon's state without locks; a PUT handler is a coroutine (it may wait for a durable write).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl

log = logging.getLogger(__name__)

MAX_REQUEST_HEAD = 16 * 1024
#: The API server's limit of a request body (apiserver's MaxRequestBodyBytes).
MAX_REQUEST_BODY = 3 * 1024 * 1024
#: Pending connections the unix socket queues (the kernel caps it at net.core.somaxconn). A DRA driver
#: fetches each claim of a burst of pods at once; past asyncio's default of 100, a unix connect finds
#: the queue full (EAGAIN), asyncio takes that for a connect in progress, and the request then fails
#: with ENOTCONN ("Transport endpoint is not connected"): the pod waits for a retry.
BACKLOG = 4096
_REASONS = {
    100: "Continue",
    200: "OK",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    411: "Length Required",
    413: "Content Too Large",
    422: "Unprocessable Entity",
    500: "Internal Server Error",
}


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes
    content_type: str = "application/json"

    @classmethod
    def json(cls, value: object, status: int = 200) -> Response:
        # One line: json's C encoder serves only that (indent takes the pure-Python one), and a DRA
        # driver fetches each claim of a burst here. The CLI prints `--json` indented itself.
        return cls(status, (json.dumps(value) + "\n").encode())

    @classmethod
    def text(cls, text: str, status: int = 200, content_type: str = "text/plain; charset=utf-8") -> Response:
        return cls(status, text.encode(), content_type)


Handler = Callable[[], Response]
#: Serves every path under a prefix; takes the rest of the path, still URL-encoded.
PrefixHandler = Callable[[str], Response]


@dataclass(frozen=True, slots=True)
class PutRequest:
    """A PUT under a prefix: the rest of the path (still URL-encoded), the query's parameters (the last of a
    repeated one), the body's bytes."""

    rest: str
    query: Mapping[str, str]
    body: bytes


PutHandler = Callable[[PutRequest], Awaitable[Response]]


class StatusServer:
    """Serves `routes` (path -> handler) on a unix socket (mode 0660) and optionally on host:port;
    `prefixes` (`/claims/` -> handler) serve the paths below them that no route names; `puts` (prefix ->
    handler) take the PUTs below them."""

    def __init__(
        self,
        routes: dict[str, Handler],
        prefixes: dict[str, PrefixHandler] | None = None,
        puts: dict[str, PutHandler] | None = None,
    ) -> None:
        self._routes = routes
        self._prefixes = prefixes or {}
        self._puts = puts or {}
        self._servers: list[asyncio.Server] = []
        self.tcp_address: tuple[str, int] | None = None

    async def start(self, unix_path: Path, tcp: tuple[str, int] | None = None) -> None:
        await asyncio.to_thread(_remove_stale, unix_path)
        server = await asyncio.start_unix_server(self._serve, path=str(unix_path), backlog=BACKLOG)
        os.chmod(unix_path, 0o660)
        self._servers.append(server)
        if tcp is not None:
            host, port = tcp
            try:
                tcp_server = await asyncio.start_server(self._serve, host=host, port=port)
            except OSError as err:
                await self.stop()
                # asyncio words the bind failure itself ("error while attempting to bind on ..."): the
                # errno's own text says it in the words every other command uses.
                reason = os.strerror(err.errno) if err.errno else str(err)
                raise OSError(
                    f"cannot listen on {host}:{port}: {reason} — choose another --http-addr"
                ) from None
            self._servers.append(tcp_server)
            sockname = tcp_server.sockets[0].getsockname()
            self.tcp_address = (str(sockname[0]), int(sockname[1]))

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            response = await self._respond(reader, writer)
            head = (
                f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'Error')}\r\n"
                f"Content-Type: {response.content_type}\r\n"
                f"Content-Length: {len(response.body)}\r\n"
                "Connection: close\r\n\r\n"
            )
            writer.write(head.encode() + response.body)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away; nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _respond(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Response:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            return Response.json({"error": "request head too large"}, 400)
        if len(head) > MAX_REQUEST_HEAD:
            return Response.json({"error": "request head too large"}, 400)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return Response.json({"error": "malformed request line"}, 400)
        method, target = parts[0], parts[1]
        path, _, query = target.partition("?")
        if method == "PUT" and (put := self._put_handler(path, query)) is not None:
            request = await _read_body(reader, writer, _headers(lines[1:]), put[0])
            return request if isinstance(request, Response) else await self._run_put(path, put[1], request)
        handler = self._routes.get(path) or self._prefix_handler(path)
        if handler is None:
            known = sorted([*self._routes, *(f"{p}..." for p in self._prefixes)])
            return Response.json({"error": f"no such path {path}; try {', '.join(known)}"}, 404)
        if method not in ("GET", "HEAD"):
            return Response.json({"error": f"method {method} not allowed; use GET"}, 405)
        try:
            response = handler()
        except Exception as err:
            log.exception("status handler for %s failed", path)
            return Response.json({"error": f"{type(err).__name__}: {err}"}, 500)
        return Response(response.status, b"", response.content_type) if method == "HEAD" else response

    def _put_handler(self, path: str, query: str) -> tuple[PutRequest, PutHandler] | None:
        """The handler of a PUT to `path`, with the request it gets (its body still to read)."""
        for prefix, serve in self._puts.items():
            if path.startswith(prefix) and len(path) > len(prefix):
                return PutRequest(path[len(prefix) :], dict(parse_qsl(query)), b""), serve
        return None

    async def _run_put(self, path: str, serve: PutHandler, request: PutRequest) -> Response:
        try:
            return await serve(request)
        except Exception as err:
            log.exception("status handler for PUT %s failed", path)
            return Response.json({"error": f"{type(err).__name__}: {err}"}, 500)

    def _prefix_handler(self, path: str) -> Handler | None:
        for prefix, serve in self._prefixes.items():
            if path.startswith(prefix) and len(path) > len(prefix):
                rest = path[len(prefix) :]
                return lambda: serve(rest)
        return None


def _headers(lines: list[str]) -> dict[str, str]:
    """The request's header fields, names lower-cased."""
    fields = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if sep:
            fields[name.strip().lower()] = value.strip()
    return fields


async def _read_body(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    headers: Mapping[str, str],
    request: PutRequest,
) -> PutRequest | Response:
    """The request with its body, or the answer that refuses it (no length, too large)."""
    length = headers.get("content-length", "")
    if not length.isascii() or not length.isdigit():
        return Response.json({"error": "a PUT needs a Content-Length (a chunked body is not read)"}, 411)
    size = int(length)
    if size > MAX_REQUEST_BODY:
        return Response.json({"error": f"request body of {size} bytes; the limit is {MAX_REQUEST_BODY}"}, 413)
    if headers.get("expect", "").lower() == "100-continue":
        # curl asks before it sends a large body; it would wait a second for this line otherwise.
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await writer.drain()
    body = await reader.readexactly(size)
    return PutRequest(request.rest, request.query, body)


def _remove_stale(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
