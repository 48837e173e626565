"""Kubelet restarts, the scenario that matters most: one restart gives exactly one re-registration.

Each restart flavour runs 20 times in a row, under inotify and under the polling fallback. Counting
is done at barriers (the next restart, then a forced re-registration), so a late duplicate would show
up in the totals without any fixed sleep.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence

import pytest

from kubedevice.plugin import (
    Allocation,
    Backoff,
    Device,
    DevicePlugin,
    EventKind,
    LifecycleEvent,
    PluginServer,
)
from tests.plugin_kubelet import FakeKubelet, exists, make_stale_socket, plugin_dir, wait_until

__all__ = ["plugin_dir"]

RESTARTS = 20
FAST_BACKOFF = Backoff(initial=0.01, cap=0.1)


class Widgets(DevicePlugin):
    resource_name = "example.com/widget"
    poll_interval = 0.05

    async def devices(self) -> Sequence[Device]:
        return [Device("w-0"), Device("w-1")]

    async def allocate(self, devices: Sequence[Device]) -> Allocation:
        return Allocation()


def make_server(directory: str, use_inotify: bool, events: list[LifecycleEvent]) -> PluginServer:
    return PluginServer(
        Widgets(),
        directory,
        use_inotify=use_inotify,
        poll_interval=0.05,
        backoff=FAST_BACKOFF,
        on_event=events.append,
    )


def kinds(events: list[LifecycleEvent], kind: EventKind) -> list[LifecycleEvent]:
    return [e for e in events if e.kind == kind]


async def force_barrier(server: PluginServer, expected_total: int) -> None:
    """Force one more registration and check the total is exactly one more: nothing was pending."""
    server.request_reregistration()
    await wait_until(lambda: server.registrations >= expected_total, what=f"{expected_total} registrations")
    assert server.registrations == expected_total


@pytest.mark.parametrize("use_inotify", [True, False], ids=["inotify", "polling"])
@pytest.mark.parametrize("cleanup", [False, True], ids=["socket-recreated", "kubelet-cleanup"])
async def test_each_kubelet_restart_gives_exactly_one_reregistration(
    plugin_dir: str, use_inotify: bool, cleanup: bool
) -> None:
    events: list[LifecycleEvent] = []
    kubelet = FakeKubelet(plugin_dir, cleanup_on_start=cleanup)
    await kubelet.start()
    kubelets = [kubelet]
    async with make_server(plugin_dir, use_inotify, events) as server:
        assert server.watcher.mode == ("inotify" if use_inotify else "polling")
        await kubelet.wait_registrations(1)
        for restart in range(1, RESTARTS + 1):
            old_socket = server.socket_path
            await kubelet.stop(remove_socket=True)
            kubelet = FakeKubelet(plugin_dir, cleanup_on_start=cleanup)
            await kubelet.start()
            kubelets.append(kubelet)
            registration = await kubelet.wait_registrations(1)
            await wait_until(
                lambda n=restart + 1: server.registrations == n, what=f"restart {restart} handled"
            )
            # Re-served on a fresh socket; the previous one is gone.
            assert os.path.join(plugin_dir, registration.request.endpoint) == server.socket_path
            assert server.socket_path != old_socket
            assert old_socket is not None
            await wait_until(lambda gone=old_socket: not exists(gone), what="old socket removed")
            await kubelet.wait_for(lambda r=registration: bool(r.lists), "ListAndWatch after re-registration")
            assert len(kinds(events, EventKind.KUBELET_RESTART)) == restart
        await force_barrier(server, RESTARTS + 2)
        assert [len(k.registrations) for k in kubelets] == [1] * RESTARTS + [2]
        assert len(kinds(events, EventKind.REGISTERED)) == 1
        assert len(kinds(events, EventKind.REREGISTERED)) == RESTARTS + 1
        assert len(kinds(events, EventKind.KUBELET_RESTART)) == RESTARTS
        assert server.metrics.value("kubedevice_plugin_kubelet_restarts_total") == RESTARTS
        assert server.metrics.value("kubedevice_plugin_registrations_total", result="ok") == RESTARTS + 2
    await kubelet.stop()


@pytest.mark.parametrize("use_inotify", [True, False], ids=["inotify", "polling"])
async def test_deleting_only_the_plugin_socket_gives_one_reregistration(
    plugin_dir: str, use_inotify: bool
) -> None:
    events: list[LifecycleEvent] = []
    async with FakeKubelet(plugin_dir) as kubelet, make_server(plugin_dir, use_inotify, events) as server:
        await kubelet.wait_registrations(1)
        for restart in range(1, RESTARTS + 1):
            deleted = server.socket_path
            assert deleted is not None
            os.unlink(deleted)
            registration = await kubelet.wait_registrations(restart + 1)
            await wait_until(
                lambda n=restart + 1: server.registrations == n, what=f"deletion {restart} handled"
            )
            assert os.path.join(plugin_dir, registration.request.endpoint) == server.socket_path
            assert server.socket_path != deleted and exists(server.socket_path)
            assert kinds(events, EventKind.KUBELET_RESTART)[-1].fields == {"reason": "own-socket-deleted"}
        await force_barrier(server, RESTARTS + 2)
        assert len(kubelet.registrations) == RESTARTS + 2
        assert len(kinds(events, EventKind.KUBELET_RESTART)) == RESTARTS


async def test_keeps_retrying_while_the_registration_server_is_down(plugin_dir: str) -> None:
    events: list[LifecycleEvent] = []
    # A dead kubelet: its socket file is there, nobody listens.
    kubelet = FakeKubelet(plugin_dir)
    make_stale_socket(kubelet.socket)
    async with make_server(plugin_dir, True, events) as server:
        await wait_until(
            lambda: len(kinds(events, EventKind.REGISTER_FAILED)) >= 5, what="several failed attempts"
        )
        assert {e.fields["code"] for e in kinds(events, EventKind.REGISTER_FAILED)} == {"UNAVAILABLE"}
        assert server.registrations == 0
        # Back up, refusing at first (a kubelet that is not ready yet): still retried.
        kubelet = FakeKubelet(plugin_dir)
        kubelet.refuse = "device manager not started"
        await kubelet.start()
        failures = len(kinds(events, EventKind.REGISTER_FAILED))
        await wait_until(
            lambda: len(kinds(events, EventKind.REGISTER_FAILED)) >= failures + 3, what="refused attempts"
        )
        assert kinds(events, EventKind.REGISTER_FAILED)[-1].fields["code"] == "UNKNOWN"
        kubelet.refuse = None
        await kubelet.wait_registrations(1)
        await wait_until(lambda: server.registrations == 1, what="registration")
        assert server.metrics.value("kubedevice_plugin_registrations_total", result="failed") >= failures + 3
        await kubelet.stop()


async def test_kubelet_socket_removed_and_absent_for_a_while(plugin_dir: str) -> None:
    events: list[LifecycleEvent] = []
    async with FakeKubelet(plugin_dir) as kubelet, make_server(plugin_dir, True, events) as server:
        await kubelet.wait_registrations(1)
        await kubelet.stop(remove_socket=True)
        await wait_until(lambda: len(kinds(events, EventKind.KUBELET_RESTART)) == 1, what="restart noticed")
        assert server.registrations == 1
        kubelet = FakeKubelet(plugin_dir)
        await kubelet.start()
        await kubelet.wait_registrations(1)
        await wait_until(lambda: server.registrations == 2, what="re-registration")
        assert len(kinds(events, EventKind.KUBELET_RESTART)) == 1
        await kubelet.stop()


async def test_stop_ends_promptly_in_every_phase_of_a_restart(plugin_dir: str) -> None:
    # Stop lands while waiting for kubelet.sock, mid-retry, and right as a restart is noticed.
    for phase in range(6):
        events: list[LifecycleEvent] = []
        kubelet = FakeKubelet(plugin_dir)
        if phase % 3 == 1:
            make_stale_socket(kubelet.socket)
        elif phase % 3 == 2:
            await kubelet.start()
        server = make_server(plugin_dir, use_inotify=phase < 3, events=events)
        await server.start()
        await wait_until(lambda s=server: s.inventory.ready.is_set(), what="device list")
        if phase % 3 == 2:
            await kubelet.wait_registrations(1)
            await kubelet.stop()
            await kubelet.start()
        async with asyncio.timeout(10):
            await server.stop()
        assert events[-1].kind == EventKind.STOPPED
        assert not [n for n in os.listdir(plugin_dir) if n.startswith("example.com")]
        await kubelet.stop(remove_socket=True)
