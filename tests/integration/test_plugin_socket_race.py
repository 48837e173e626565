"""A kubelet restart that deletes the plugin's socket the moment it is created, before the plugin has
checked that it answers: the plugin serves a fresh socket and registers, it does not stop.

The kubelet removes every socket in the plugin folder when it starts; a plugin re-registering at that
moment loses the socket it has just bound. The deleter here is a thread reacting to inotify's CREATE, so
the deletion lands within microseconds of the bind, before the plugin's own check can connect.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence

import pytest
from asyncinotify import Inotify, Mask

from kubedevice.api.constants import KUBELET_SOCKET_NAME
from kubedevice.plugin import Allocation, Backoff, ConfigError, Device, DevicePlugin, PluginServer
from tests.plugin_kubelet import FakeKubelet, exists, plugin_dir, wait_until

__all__ = ["plugin_dir"]


class Widgets(DevicePlugin):
    resource_name = "example.com/widget"
    poll_interval = 0.05

    async def devices(self) -> Sequence[Device]:
        return [Device("w-0")]

    async def allocate(self, devices: Sequence[Device]) -> Allocation:
        return Allocation()


def delete_next_plugin_sockets(directory: str, count: int, deleted: list[str]) -> threading.Thread:
    """Delete the next `count` plugin sockets created in `directory` as soon as they appear.

    A deletion can still land after the plugin's check (this thread needs the interpreter lock too);
    then the plugin sees its socket deleted and serves again, which only makes more sockets to delete.
    """
    inotify = Inotify()
    inotify.add_watch(directory, Mask.CREATE)
    inotify.sync_timeout = 5.0

    def run() -> None:
        with inotify:
            while len(deleted) < count:
                event = inotify.sync_get()
                if event is None:
                    return  # timed out: the test's own wait reports what is missing
                name = str(event.name)
                if name.endswith(".sock") and name != KUBELET_SOCKET_NAME:
                    os.unlink(os.path.join(directory, name))
                    deleted.append(name)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


async def test_a_socket_deleted_before_its_own_check_is_served_again(plugin_dir: str) -> None:
    async with FakeKubelet(plugin_dir) as kubelet:
        server = PluginServer(Widgets(), plugin_dir, backoff=Backoff(initial=0.01, cap=0.1))
        async with server:
            await kubelet.wait_registrations(1)
            deleted: list[str] = []
            deleter = delete_next_plugin_sockets(plugin_dir, 2, deleted)
            first = server.socket_path
            assert first is not None
            os.unlink(first)  # as a kubelet restart does; the plugin re-serves, and loses that socket too
            await wait_until(lambda: len(deleted) == 2, what="two fresh sockets deleted at creation")
            deleter.join(timeout=20)
            registration = await kubelet.wait_registrations(2)
            assert registration.request.endpoint not in deleted
            assert exists(server.socket_path)
            assert os.path.join(plugin_dir, registration.request.endpoint) == server.socket_path
            await kubelet.wait_for(lambda: bool(registration.lists), "ListAndWatch after the registration")


async def test_sockets_deleted_every_time_stop_the_plugin_with_one_line(plugin_dir: str) -> None:
    async with FakeKubelet(plugin_dir) as kubelet:
        server = PluginServer(Widgets(), plugin_dir, backoff=Backoff(initial=0.01, cap=0.1))
        await server.start()
        await kubelet.wait_registrations(1)
        deleted: list[str] = []
        # Every socket from now on, so that ten in a row are gone before they answer however the
        # threads interleave; the thread ends when its inotify read times out after the test.
        delete_next_plugin_sockets(plugin_dir, 1_000_000, deleted)
        first = server.socket_path
        assert first is not None
        os.unlink(first)
        with pytest.raises(ConfigError) as failed:
            await asyncio.wait_for(server.run(), timeout=60)
        assert len(deleted) >= 10
        assert str(failed.value) == (
            f"own sockets in {plugin_dir} were deleted 10 times in a row before they could answer — "
            "check what removes files from the plugin folder"
        )
