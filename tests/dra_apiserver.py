"""A stand-in Kubernetes API server for DRA cluster mode: Node, ResourceClaim and ResourceSlice over HTTP.

No API server runs on these machines, so cluster mode is tested against this: plain HTTP/1.1 on
127.0.0.1 (loopback only), reached through a kubeconfig as a real cluster would be. Every object it keeps
and every answer it gives is a model of the client library (lightkube) turned into JSON, never a
hand-written dict: what the backend reads has the API's shape by construction. It does what the backend
relies on: generateName, resourceVersion (a global counter; an update with a stale one is a 409
Conflict), field selectors on spec.driver / spec.nodeName, list + watch from a version (chunked stream),
the API's Status errors (NotFound text `<plural>.<group> "<name>" not found`), a ResourceSlice validated as
the API server validates it (kubedevice.resource.slice_rules: the limits, counter sets apart from devices,
taints...), canonical quantities for a few inputs as the real one does ("0.5Gi" comes back as "512Mi"),
and claims: listed in all namespaces, their status subresource replaced (PUT, resourceVersion checked).
Faults can be queued per method.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgspec
from lightkube.models.meta_v1 import ListMeta, ObjectMeta, Status, StatusDetails
from lightkube.models.resource_v1 import ResourceSliceList
from lightkube.resources.core_v1 import Node
from lightkube.resources.resource_v1 import ResourceClaim, ResourceSlice

from kubedevice.resource.slice_rules import validate_slice_spec

SLICES = "/apis/resource.k8s.io/v1/resourceslices"
_CLAIM_PATH = re.compile(r"^/apis/resource\.k8s\.io/v1/namespaces/([^/]+)/resourceclaims/([^/]+)(/status)?$")
CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"
_NODE_PATH = re.compile(r"^/api/v1/nodes/([^/]+)$")
#: The real API server sends quantities back in canonical form; these are the ones the tests use.
CANONICAL = {"0.5Gi": "512Mi", "1000m": "1"}
TOKEN = "stand-in-token"


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


@dataclass
class ApiServer:
    nodes: dict[str, Node] = field(default_factory=dict)
    claims: dict[tuple[str, str], ResourceClaim] = field(default_factory=dict)
    slices: dict[str, ResourceSlice] = field(default_factory=dict)
    #: Every request, in order ("GET", path, query) — what the backend did.
    log: list[Request] = field(default_factory=list)
    #: Queued faults: (method, HTTP status) answered instead of the next matching request.
    faults: list[tuple[str, int]] = field(default_factory=list)
    version: int = 1
    #: Status updates of claims taken.
    status_writes: int = 0
    events: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    port: int = 0
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _server: asyncio.Server | None = None
    _handlers: set[asyncio.Task[None]] = field(default_factory=set)

    # -- set-up -------------------------------------------------------------------------------------

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, host="127.0.0.1", port=0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            # Handlers (open watch streams among them) are ended here, not left to the loop's shutdown.
            for task in list(self._handlers):
                task.cancel()
            await asyncio.gather(*self._handlers, return_exceptions=True)
            await self._server.wait_closed()

    def kubeconfig(self, folder: Path, token: str = TOKEN) -> Path:
        path = folder / "kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "stand-in", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}],
            "users": [{"name": "stand-in", "user": {"token": token}}],
            "contexts": [{"name": "stand-in", "context": {"cluster": "stand-in", "user": "stand-in"}}],
            "current-context": "stand-in",
        }
        path.write_text(json.dumps(config))
        return path

    def add_node(self, name: str) -> str:
        uid = _uid()
        self.nodes[name] = Node(apiVersion="v1", kind="Node", metadata=ObjectMeta(name=name, uid=uid))
        return uid

    def add_claim(self, claim: ResourceClaim) -> None:
        assert claim.metadata is not None and claim.metadata.name and claim.metadata.namespace
        claim.metadata.uid = claim.metadata.uid or _uid()
        claim.metadata.resourceVersion = self._next_version()
        self.claims[(claim.metadata.namespace, claim.metadata.name)] = claim

    # -- what tests look at and do from outside ---------------------------------------------------------

    def slice_json(self) -> list[dict[str, Any]]:
        return [self.slices[name].to_dict() for name in sorted(self.slices)]

    def writes(self) -> list[tuple[str, str]]:
        return [(r.method, r.path) for r in self.log if r.method in ("POST", "PUT", "DELETE")]

    async def delete_slice(self, name: str) -> None:
        """Another actor deletes a slice (an admin, the kubelet's wipe)."""
        await self._delete(name)

    async def put_slice(self, obj: dict[str, Any]) -> None:
        """Another actor creates or overwrites a slice as given (a stale one left by an earlier instance)."""
        item = ResourceSlice.from_dict(obj)
        assert item.metadata is not None and item.metadata.name
        event = "MODIFIED" if item.metadata.name in self.slices else "ADDED"
        await self._store(item, event)

    async def expire_watches(self) -> None:
        """Every open watch gets the API's ERROR event `410 Gone` and its stream ends, as when the version
        it watches from has been compacted away; a client must list again."""
        _, gone = _status(410, "Expired", "too old resource version: 1 (2)")
        self.events.append((self._bump(), "ERROR", gone))
        async with self._changed:
            self._changed.notify_all()

    # -- HTTP -------------------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                self.log.append(request)
                if request.query.get("watch") == "true":
                    await self._stream_watch(request, writer)
                    return
                status, body = await self._answer(request)
                data = json.dumps(body).encode()
                writer.write(
                    f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(data)}\r\n\r\n".encode()
                    + data
                )
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # stop() ends the handler; ending it cancelled would be logged as an error by asyncio's streams.
            pass
        finally:
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _answer(self, request: Request) -> tuple[int, dict[str, Any]]:
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return _status(401, "Unauthorized", "Unauthorized")
        for fault in self.faults:
            if fault[0] == request.method:
                self.faults.remove(fault)
                return _status(fault[1], "InternalError" if fault[1] >= 500 else "Conflict", "injected fault")
        path, method = request.path, request.method
        if (m := _NODE_PATH.match(path)) and method == "GET":
            node = self.nodes.get(m.group(1))
            return (200, node.to_dict()) if node else _not_found("nodes", "", m.group(1))
        if (m := _CLAIM_PATH.match(path)) and method in ("GET", "PUT"):
            claim = self.claims.get((m.group(1), m.group(2)))
            if claim is None:
                return _not_found("resourceclaims", "resource.k8s.io", m.group(2))
            if method == "PUT" and m.group(3):
                return self._replace_claim_status(claim, request.body)
            return 200, claim.to_dict()
        if path == CLAIMS and method == "GET":
            items = [c.to_dict() for _, c in sorted(self.claims.items())]
            return 200, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimList", "items": items}
        if path == SLICES and method == "GET":
            items = [s for s in self.slices.values() if _selected(s, request.query)]
            listing = ResourceSliceList(
                apiVersion="resource.k8s.io/v1",
                kind="ResourceSliceList",
                items=sorted(items, key=lambda s: s.metadata.name if s.metadata else ""),
                metadata=ListMeta(resourceVersion=str(self.version)),
            )
            return 200, listing.to_dict()
        if path == SLICES and method == "POST":
            return await self._create(request.body)
        if path.startswith(SLICES + "/"):
            name = path[len(SLICES) + 1 :]
            if method == "PUT":
                return await self._replace(name, request.body)
            if method == "DELETE":
                deleted = await self._delete(name)
                return (200, deleted) if deleted else _not_found("resourceslices", "resource.k8s.io", name)
        return _status(404, "NotFound", f"the server could not find the requested resource ({method} {path})")

    def _replace_claim_status(self, claim: ResourceClaim, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """UpdateStatus: only the status changes; a stale resourceVersion is a 409 Conflict."""
        assert claim.metadata is not None
        given = ResourceClaim.from_dict(body)
        if given.metadata is None or given.metadata.resourceVersion != claim.metadata.resourceVersion:
            return _status(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on resourceclaims.resource.k8s.io "{claim.metadata.name}": '
                "the object has been modified; please apply your changes to the latest version and try again",
            )
        self.status_writes += 1
        claim.status = given.status
        claim.metadata.resourceVersion = self._next_version()
        return 200, claim.to_dict()

    async def _create(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        try:
            item = ResourceSlice.from_dict(body)
        except msgspec.ValidationError as err:
            return _status(400, "BadRequest", str(err))
        metadata = item.metadata or ObjectMeta()
        if not metadata.name:
            if not metadata.generateName:
                return _status(422, "Invalid", "metadata.name: Required value")
            metadata.name = metadata.generateName[:58] + secrets.token_hex(3)[:5]
        if metadata.name in self.slices:
            return _status(
                409, "AlreadyExists", f'resourceslices.resource.k8s.io "{metadata.name}" already exists'
            )
        metadata.uid = _uid()
        item.metadata = metadata
        if invalid := _invalid(item):
            return invalid
        return 201, await self._store(item, "ADDED")

    async def _replace(self, name: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        try:
            item = ResourceSlice.from_dict(body)
        except msgspec.ValidationError as err:
            return _status(400, "BadRequest", str(err))
        old = self.slices.get(name)
        if old is None:
            return _not_found("resourceslices", "resource.k8s.io", name)
        assert item.metadata is not None and old.metadata is not None
        if item.metadata.resourceVersion != old.metadata.resourceVersion:
            return _status(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on resourceslices.resource.k8s.io "{name}": '
                "the object has been modified; please apply your changes to the latest version and try again",
            )
        item.metadata.uid = old.metadata.uid
        if invalid := _invalid(item):
            return invalid
        return 200, await self._store(item, "MODIFIED")

    async def _store(self, item: ResourceSlice, event: str) -> dict[str, Any]:
        assert item.metadata is not None and item.metadata.name and item.spec is not None
        item.apiVersion, item.kind = "resource.k8s.io/v1", "ResourceSlice"
        item.metadata.resourceVersion = self._next_version()
        for device in item.spec.devices or []:
            for capacity in (device.capacity or {}).values():
                capacity["value"] = CANONICAL.get(capacity["value"], capacity["value"])
        self.slices[item.metadata.name] = item
        return await self._event(event, item)

    async def _delete(self, name: str) -> dict[str, Any] | None:
        item = self.slices.pop(name, None)
        if item is None:
            return None
        assert item.metadata is not None
        item.metadata.resourceVersion = self._next_version()
        return await self._event("DELETED", item)

    async def _event(self, kind: str, item: ResourceSlice) -> dict[str, Any]:
        data = item.to_dict()
        self.events.append((self.version, kind, data))
        async with self._changed:
            self._changed.notify_all()
        return data

    async def _stream_watch(self, request: Request, writer: asyncio.StreamWriter) -> None:
        since = int(request.query.get("resourceVersion") or self.version)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        await writer.drain()
        while True:
            pending = [(v, k, d) for v, k, d in self.events if v > since]
            for version, kind, data in pending:
                since = version
                if kind == "ERROR" or _selected(ResourceSlice.from_dict(data), request.query):
                    line = json.dumps({"type": kind, "object": data}).encode() + b"\n"
                    writer.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                if kind == "ERROR":
                    writer.write(b"0\r\n\r\n")
                    await writer.drain()
                    return
            await writer.drain()
            async with self._changed:
                if not any(v > since for v, _, _ in self.events):
                    await self._changed.wait()

    def _next_version(self) -> str:
        return str(self._bump())

    def _bump(self) -> int:
        self.version += 1
        return self.version


# -- helpers --------------------------------------------------------------------------------------------


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {
        k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)
    }
    length = int(headers.get("content-length", "0"))
    body = json.loads(await reader.readexactly(length)) if length else None
    url = urlsplit(target)
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    return Request(method, url.path, query, headers, body)


def _selected(item: ResourceSlice, query: dict[str, str]) -> bool:
    spec = item.spec
    for term in filter(None, query.get("fieldSelector", "").split(",")):
        key, _, value = term.partition("=")
        actual = {"spec.driver": spec.driver, "spec.nodeName": spec.nodeName}.get(key) if spec else None
        if actual != value:
            return False
    return True


def _invalid(item: ResourceSlice) -> tuple[int, dict[str, Any]] | None:
    """The API server's validation of the slice's spec, its 422 answer when it refuses."""
    problems = validate_slice_spec(item.to_dict().get("spec"))
    if not problems:
        return None
    name = item.metadata.name if item.metadata is not None else ""
    message = f'ResourceSlice.resource.k8s.io "{name}" is invalid: ' + ", ".join(str(p) for p in problems)
    return _status(422, "Invalid", message)


def _status(code: int, reason: str, message: str) -> tuple[int, dict[str, Any]]:
    status = Status(
        apiVersion="v1", kind="Status", status="Failure", code=code, reason=reason, message=message
    )
    return code, status.to_dict()


def _not_found(plural: str, group: str, name: str) -> tuple[int, dict[str, Any]]:
    resource = f"{plural}.{group}" if group else plural
    status = Status(
        apiVersion="v1",
        kind="Status",
        status="Failure",
        code=404,
        reason="NotFound",
        message=f'{resource} "{name}" not found',
        details=StatusDetails(name=name, group=group or None, kind=plural),
    )
    return 404, status.to_dict()


def _uid() -> str:
    h = secrets.token_hex(16)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
