"""Cluster mode: claims from the API server, devices published as ResourceSlice objects owned by the Node.

Publication follows the Go helper's `PublishResources` (its resourceslice controller): slices named by
`generateName: <node>-<driver>-`, owned by the Node (so they go when the Node goes), `spec.nodeName` and
the pool named after the node, counter sets in slices of their own and at most 128 devices a slice (64
where a device has taints or consumes counters; see slices.py). One task brings the API server's slices to
what `publish()` last asked for: when the content differs it bumps the pool generation, updates the
slices it can reuse, creates the missing ones and deletes the surplus; when nothing differs it writes
nothing. A failed call is logged and the pass tried again with exponential backoff. A second task watches
this driver's slices on this node, so a slice deleted (or changed) by someone else is put back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kubedevice.backoff import Backoff
from kubedevice.plugin.dra.backend.errors import DRABackendError
from kubedevice.plugin.dra.backend.slices import (
    API_VERSION,
    KIND,
    PoolContent,
    body_key,
    pool_content,
    slice_spec,
    taint_times,
)
from kubedevice.plugin.dra.backend_api import (
    ClaimFetchError,
    ClaimStatusError,
    PublishedDevice,
    StatusEntries,
)
from kubedevice.plugin.dra.device_model import CounterSet
from kubedevice.tasks import cancel_and_wait

if TYPE_CHECKING:
    from kubedevice.plugin.dra.backend.kube import KubeApi

log = logging.getLogger(__name__)

#: How often a claim's status update is tried when it conflicts with other writers.
_STATUS_TRIES = 6


class ClusterBackend:
    """One driver's slices on one node, and its claims, through the API server."""

    def __init__(
        self,
        *,
        driver_name: str,
        node_name: str,
        kubeconfig: str | None,
        backoff: Backoff = Backoff(initial=0.5, cap=60.0),
    ) -> None:
        self.driver_name = driver_name
        self.node_name = node_name
        self.kubeconfig = kubeconfig
        #: The pool generation last written (0: nothing yet).
        self.generation = 0
        #: Publishing passes that ended without an error (what a test or a status view can wait on).
        self.passes = 0
        self._backoff = backoff
        self._api: KubeApi | None = None
        self._node_uid: str | None = None
        self._content: PoolContent | None = None
        self._dirty = asyncio.Event()
        # Versions of the slices this backend wrote and names it deleted: their watch events are echoes.
        self._own_versions: set[str] = set()
        self._own_deletes: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        from kubedevice.plugin.dra.backend.kube import KubeApi, KubeConfigError, KubeError

        try:
            self._api = await asyncio.to_thread(KubeApi.connect, self.kubeconfig)
        except KubeConfigError as err:
            raise DRABackendError(f"cluster mode: {err}") from None
        try:
            self._node_uid = await self._api.get_node_uid(self.node_name)
        except KubeError as err:
            if err.not_found:
                await self._api.close()
                raise DRABackendError(
                    f'node "{self.node_name}" not found on the API server — set NODE_NAME to the name of '
                    "the node this plugin runs on (spec.nodeName through the downward API)"
                ) from None
            if err.code in (401, 403):
                await self._api.close()
                raise DRABackendError(
                    f"cluster mode: reading node {self.node_name}: {err} — give the plugin's service account "
                    "the RBAC in deploy/dra-daemonset.yaml"
                ) from None
            # The API server may be down for a moment; the publishing pass asks again.
            log.warning("cannot read node %s yet: %s; trying again when publishing", self.node_name, err)
        self._tasks = [
            asyncio.create_task(self._publish_loop(), name=f"{self.driver_name} slices"),
            asyncio.create_task(self._watch_loop(), name=f"{self.driver_name} slice watch"),
        ]

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(*tasks)
        api, self._api = self._api, None
        if api is not None:
            await api.close()

    async def get_claim(self, namespace: str, name: str) -> dict[str, Any]:
        from kubedevice.plugin.dra.backend.kube import KubeError

        if self._api is None:
            raise ClaimFetchError("the API server connection is not started")
        try:
            return await self._api.get_claim(namespace, name)
        except KubeError as err:
            raise ClaimFetchError(str(err)) from None

    async def update_claim_status(self, namespace: str, name: str, entries: StatusEntries) -> None:
        """UpdateStatus of the claim with this driver's entries (others' kept), read and written again
        when someone changed the claim in between (409 Conflict), as a controller's update loop does."""
        from kubedevice.plugin.dra.backend.kube import KubeError

        for _ in range(_STATUS_TRIES - 1):
            claim = await self.get_claim(namespace, name)
            status = claim.setdefault("status", {})
            others = [e for e in status.get("devices") or [] if e.get("driver") != self.driver_name]
            status["devices"] = others + entries(claim)
            try:
                assert self._api is not None  # get_claim raised otherwise
                await self._api.replace_claim_status(claim)
                return
            except KubeError as err:
                if err.code != 409:
                    raise ClaimStatusError(str(err)) from None
        raise ClaimStatusError(
            f"claim {namespace}/{name} kept changing: {_STATUS_TRIES - 1} updates conflicted"
        )

    async def list_claims(self) -> list[dict[str, Any]]:
        from kubedevice.plugin.dra.backend.kube import KubeError

        if self._api is None:
            raise ClaimFetchError("the API server connection is not started")
        try:
            claims = await self._api.list_claims()
        except KubeError as err:
            raise ClaimFetchError(str(err)) from None
        return [c for c in claims if (c.get("status") or {}).get("allocation")]

    async def published_taint_times(self) -> dict[tuple[str, str, str, str], datetime]:
        """The taints' times in this driver's slices on this node, as the API server holds them."""
        from kubedevice.plugin.dra.backend.kube import KubeError

        if self._api is None:
            return {}
        try:
            listing = await self._api.list_slices(self.driver_name, self.node_name)
        except KubeError as err:
            log.warning("cannot read the taints published before: %s", err)
            return {}
        return taint_times(_spec(item) for item in listing.items)

    async def publish(
        self, devices: Sequence[PublishedDevice], counter_sets: Sequence[CounterSet] = ()
    ) -> None:
        """Ask for these devices and counter sets to be published; returns at once, the publishing task
        does the calls.

        Raises SliceContentError (a ValueError) for devices that cannot be published; nothing changes then.
        """
        self._content = pool_content(devices, counter_sets)
        self._dirty.set()

    # ------------------------------------------------------------------------------------------------

    async def _publish_loop(self) -> None:
        from kubedevice.plugin.dra.backend.kube import KubeError

        delays = self._backoff.delays()
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await self._sync()
            except KubeError as err:
                delay = next(delays)
                log.warning(
                    "publishing the ResourceSlices of %s failed: %s; trying again in %.3g s",
                    self.driver_name,
                    err,
                    delay,
                )
                await asyncio.sleep(delay)
                self._dirty.set()
            else:
                self.passes += 1
                delays = self._backoff.delays()

    async def _sync(self) -> None:
        """One pass: read this driver's slices on this node and make them what the content asks."""
        api, content = self._api, self._content
        if api is None or content is None:
            return
        if self._node_uid is None:
            self._node_uid = await api.get_node_uid(self.node_name)
        listing = await api.list_slices(self.driver_name, self.node_name)
        pool = [s for s in listing.items if _pool(s).get("name") == self.node_name]
        # Another pool of this driver on this node is not one this plugin publishes: surplus.
        surplus = [s for s in listing.items if _pool(s).get("name") != self.node_name]
        generation = max((_generation(s) for s in pool), default=0)
        current = [s for s in pool if _generation(s) == generation]
        obsolete = [s for s in pool if _generation(s) != generation]
        if self._up_to_date(current, content):
            self.generation = generation
        else:
            # Never go back, even if every slice was deleted since; a failed pass uses no number up.
            target = max(generation, self.generation) + 1
            reusable = sorted(current, key=_name) + sorted(obsolete, key=_name)
            for index in range(content.slice_count):
                spec = slice_spec(
                    driver=self.driver_name,
                    node_name=self.node_name,
                    generation=target,
                    content=content,
                    index=index,
                )
                if reusable:
                    written = await api.replace_slice(self._updated(reusable.pop(0), spec))
                else:
                    written = await api.create_slice(self._new(spec))
                self._note_written(written)
            obsolete = reusable
            self.generation = target
            log.info(
                "published %d device(s) of %s in %d ResourceSlice(s) (pool %s, generation %d)",
                content.device_count,
                self.driver_name,
                content.slice_count,
                self.node_name,
                self.generation,
            )
        for stale in obsolete + surplus:
            self._own_deletes.add(_name(stale))
            await api.delete_slice(_name(stale))

    def _up_to_date(self, current: list[dict[str, Any]], content: PoolContent) -> bool:
        if len(current) != content.slice_count:
            return False
        unmatched = list(current)
        for body in content.bodies:
            wanted = body_key(body)
            match = next(
                (
                    s
                    for s in unmatched
                    if _pool(s).get("resourceSliceCount") == content.slice_count
                    and body_key(_spec(s)) == wanted
                    and self._owned(s)
                ),
                None,
            )
            if match is None:
                return False
            unmatched.remove(match)
        return True

    def _owner(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "name": self.node_name,
            "uid": self._node_uid,
            "controller": True,
        }

    def _owned(self, item: dict[str, Any]) -> bool:
        owners = (item.get("metadata") or {}).get("ownerReferences") or []
        return any(o.get("kind") == "Node" and o.get("uid") == self._node_uid for o in owners)

    def _new(self, spec: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {
                "generateName": f"{self.node_name}-{self.driver_name}-",
                "ownerReferences": [self._owner()],
            },
            "spec": spec,
        }

    def _updated(self, item: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
        metadata = dict(item.get("metadata") or {})
        metadata["ownerReferences"] = [self._owner()]
        # resourceVersion stays: a concurrent change makes the update a Conflict, and the pass runs again.
        return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec}

    def _note_written(self, item: dict[str, Any]) -> None:
        version = (item.get("metadata") or {}).get("resourceVersion")
        if version:
            self._own_versions.add(str(version))

    async def _watch_loop(self) -> None:
        """Follow this driver's slices on this node; any change not made here starts a publishing pass."""
        from kubedevice.plugin.dra.backend.kube import KubeError

        delays = self._backoff.delays()
        while True:
            api = self._api
            if api is None:
                return
            # Echoes not yet seen are forgotten: at worst one pass too many, which writes nothing.
            self._own_versions.clear()
            self._own_deletes.clear()
            try:
                listing = await api.list_slices(self.driver_name, self.node_name)
                # Whatever happened while the watch was down is seen by one pass.
                self._dirty.set()
                async for event, item in api.watch_slices(
                    self.driver_name, self.node_name, listing.resource_version
                ):
                    delays = self._backoff.delays()
                    if self._is_echo(event, item):
                        continue
                    log.info("ResourceSlice %s of %s: %s elsewhere", _name(item), self.driver_name, event)
                    self._dirty.set()
            except KubeError as err:
                delay = next(delays)
                log.warning(
                    "watching the ResourceSlices of %s failed: %s; trying again in %.3g s",
                    self.driver_name,
                    err,
                    delay,
                )
                await asyncio.sleep(delay)

    def _is_echo(self, event: str, item: dict[str, Any]) -> bool:
        if event == "DELETED":
            name = _name(item)
            if name in self._own_deletes:
                self._own_deletes.discard(name)
                return True
            return False
        version = str((item.get("metadata") or {}).get("resourceVersion"))
        if version in self._own_versions:
            self._own_versions.discard(version)
            return True
        return False


def _spec(item: dict[str, Any]) -> dict[str, Any]:
    spec = item.get("spec")
    return spec if isinstance(spec, dict) else {}


def _pool(item: dict[str, Any]) -> dict[str, Any]:
    pool = _spec(item).get("pool")
    return pool if isinstance(pool, dict) else {}


def _generation(item: dict[str, Any]) -> int:
    value = _pool(item).get("generation")
    return value if isinstance(value, int) else 0


def _name(item: dict[str, Any]) -> str:
    return str((item.get("metadata") or {}).get("name", ""))
