"""Turns at the plugins: pods admitted concurrently call each plugin in admission order.

The kubelet admits one pod at a time, so each plugin sees a pod's calls, then the next pod's. A caller that
admits pods concurrently (the node daemon) has each pod hold the turns of the resources it needs while it is
allocated; the turns are taken in sorted order (two pods never wait for each other) and queue first come,
first served. A turn is handed to the next pod as soon as the pod's last Allocate on that resource is on its
way (`Allocator` says when, `last_call`): the next pod then picks its devices while that call runs, and its
own calls queue behind it at the endpoint, which makes one call at a time in the order asked. So the
plugin still sees one pod's calls after the other, while the pods' own work overlaps the plugin's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable

from kubedevice.manager.types import Container, Pod


class PluginTurns:
    """The resources' turns, and which pod holds each."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        #: pod UID -> resources whose turn it holds.
        self._held: dict[str, set[str]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, pod_uid: str, resources: Iterable[str]) -> AsyncIterator[None]:
        """The turns of `resources` for the pod, taken in sorted order; those still held when the block
        ends are given back then."""
        held = self._held.setdefault(pod_uid, set())
        try:
            for resource in sorted(set(resources)):
                await self._locks.setdefault(resource, asyncio.Lock()).acquire()
                held.add(resource)
            yield
        finally:
            for resource in list(held):
                self.last_call(pod_uid, resource)
            if self._held.get(pod_uid) is held:
                del self._held[pod_uid]

    def last_call(self, pod_uid: str, resource: str) -> None:
        """The pod makes no more calls on `resource` in this admission (its last one, if any, is queued at
        the endpoint): the next pod gets the turn. Nothing happens for a pod not holding that turn."""
        held = self._held.get(pod_uid)
        if held is not None and resource in held:
            held.discard(resource)
            self._locks[resource].release()


def is_last_request(pod: Pod, container: Container, resource: str) -> bool:
    """No container after `container` in starting order (init containers, then app containers) asks for
    `resource`: the pod's last call on it, if any, is this container's."""
    order = [*pod.init_containers, *pod.containers]
    names = [c.name for c in order]
    later = order[names.index(container.name) + 1 :] if container.name in names else []
    return not any(c.limits.get(resource, 0) > 0 for c in later)
