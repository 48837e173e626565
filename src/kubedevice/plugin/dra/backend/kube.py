"""The API server, behind the few calls cluster mode makes; the only module that imports the client library.

Everything crosses this boundary as plain JSON-shaped dicts (the API's own field names) and every failure
as a KubeError, so cluster mode's logic knows nothing of the library and swapping the library is a change
to this file alone. The library is lightkube: async, with typed `resource.k8s.io/v1` models (see
docs/architecture.md for why). This module is imported only when cluster mode is chosen, so a plugin in
standalone mode never loads it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

import httpx2
from lightkube import ApiError, AsyncClient, ConfigError, KubeConfig
from lightkube.operators import BinaryOperator, SequenceOperator
from lightkube.resources.core_v1 import Node
from lightkube.resources.resource_v1 import ResourceClaim, ResourceClaimStatus, ResourceSlice

#: Who the API server records as the writer of our slices (managedFields).
FIELD_MANAGER = "kubedevice"


class KubeError(Exception):
    """An API call failed: `code` is the HTTP status (0 when no answer came), str() the API's message."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason

    @property
    def not_found(self) -> bool:
        return self.code == 404


class KubeConfigError(Exception):
    """The kubeconfig or the in-cluster configuration cannot be used; str() says which and why."""


@dataclass(frozen=True, slots=True)
class SliceList:
    """The slices a list call returned, and the version to watch from."""

    items: list[dict[str, Any]]
    resource_version: str


def _failure(err: Exception) -> KubeError:
    if isinstance(err, ApiError):
        status = err.status
        return KubeError(status.code or 0, status.reason or "", status.message or str(err))
    return KubeError(0, type(err).__name__, str(err) or type(err).__name__)


# What a call can raise: the API's error answers and every transport failure of the HTTP layer.
_CALL_ERRORS = (ApiError, httpx2.HTTPError, OSError, ValueError)


class KubeApi:
    """One API server connection for one driver on one node."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    @classmethod
    def connect(cls, kubeconfig: str | None) -> KubeApi:
        """From a kubeconfig file (its current context), or from the pod's service account when None."""
        try:
            config = (
                KubeConfig.from_service_account() if kubeconfig is None else KubeConfig.from_file(kubeconfig)
            )
            client = AsyncClient(config=config, field_manager=FIELD_MANAGER)
        except (ConfigError, OSError, ValueError, KeyError, TypeError) as err:
            source = "the in-cluster service account" if kubeconfig is None else f"kubeconfig {kubeconfig}"
            raise KubeConfigError(f"{source}: {err}") from None
        return cls(client)

    async def close(self) -> None:
        # AsyncClient has no close of its own; its generic client closes the HTTP connections.
        await self._client._client.close()  # type: ignore[no-untyped-call]

    async def get_node_uid(self, name: str) -> str:
        try:
            node = await self._client.get(Node, name)
        except _CALL_ERRORS as err:
            raise _failure(err) from None
        uid = node.metadata.uid if node.metadata is not None else None
        if not uid:
            raise KubeError(0, "Invalid", f"node {name} has no uid")
        return str(uid)

    async def get_claim(self, namespace: str, name: str) -> dict[str, Any]:
        try:
            claim = await self._client.get(ResourceClaim, name, namespace=namespace)
        except _CALL_ERRORS as err:
            raise _failure(err) from None
        return _as_json(claim)

    async def replace_claim_status(self, body: dict[str, Any]) -> dict[str, Any]:
        """UpdateStatus of a claim; `metadata.resourceVersion` in `body` makes a concurrent change a 409."""
        meta = body.get("metadata") or {}
        claim = cast(ResourceClaimStatus, ResourceClaimStatus.from_dict(body))
        try:
            written = await self._client.replace(
                claim, str(meta.get("name")), namespace=meta.get("namespace")
            )
        except _CALL_ERRORS as err:
            raise _failure(err) from None
        return _as_json(written)

    async def list_claims(self) -> list[dict[str, Any]]:
        """Every ResourceClaim, in all namespaces."""
        try:
            return [_as_json(item) async for item in self._client.list(ResourceClaim, namespace="*")]
        except _CALL_ERRORS as err:
            raise _failure(err) from None

    async def list_slices(self, driver: str, node_name: str) -> SliceList:
        """This driver's slices on this node (field selectors the API server supports for ResourceSlice)."""
        try:
            listing = self._client.list(ResourceSlice, fields=_own_slices(driver, node_name))
            items = [_as_json(item) async for item in listing]
            version = listing.resourceVersion
        except _CALL_ERRORS as err:
            raise _failure(err) from None
        return SliceList(items, version)

    async def create_slice(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            return _as_json(await self._client.create(ResourceSlice.from_dict(body)))
        except _CALL_ERRORS as err:
            raise _failure(err) from None

    async def replace_slice(self, body: dict[str, Any]) -> dict[str, Any]:
        """Update a slice; `metadata.resourceVersion` in `body` makes a concurrent change a 409 Conflict."""
        try:
            return _as_json(await self._client.replace(ResourceSlice.from_dict(body)))
        except _CALL_ERRORS as err:
            raise _failure(err) from None

    async def delete_slice(self, name: str) -> None:
        try:
            await self._client.delete(ResourceSlice, name)
        except _CALL_ERRORS as err:
            failure = _failure(err)
            if not failure.not_found:
                raise failure from None

    async def watch_slices(
        self, driver: str, node_name: str, resource_version: str
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """Events (`ADDED`, `MODIFIED`, `DELETED`) of this driver's slices on this node from that version.

        The library resumes a watch that the server closed from the last version it saw; an error (an
        ERROR event such as `410 Gone` among them) ends the iteration with a KubeError, and the caller
        lists again.
        """
        try:
            async for event, item in self._client.watch(
                ResourceSlice, fields=_own_slices(driver, node_name), resource_version=resource_version
            ):
                yield str(event), _as_json(item)
        except _CALL_ERRORS as err:
            raise _failure(err) from None


def _own_slices(driver: str, node_name: str) -> dict[str, str | BinaryOperator | SequenceOperator]:
    return {"spec.driver": driver, "spec.nodeName": node_name}


def _as_json(obj: Any) -> dict[str, Any]:
    data = obj.to_dict()
    assert isinstance(data, dict)
    return data
