"""What a plugin author meets first: serve() and the device source, as real processes and real sockets.

`serve()` honours $KUBEDEVICE_PLUGIN_DIR, prints its lifecycle events, refuses a bad configuration in one
line with exit code 2, and waits for (never creates) the kubelet's plugin directory, saying so once. A
device source that keeps failing is retried with backoff, logged once, and its devices turn unhealthy.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from kubedevice.plugin import Device, DevicePlugin, EventKind, LifecycleEvent, PluginServer
from tests.plugin_kubelet import FakeKubelet, exists, plugin_dir, wait_until

__all__ = ["plugin_dir"]

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_plugin() -> str:
    """The README's SDK snippet, as written there."""
    text = README.read_text(encoding="utf-8")
    for block in text.split("```python")[1:]:
        code = block.split("```")[0]
        if "serve(Widgets())" in code:
            return textwrap.dedent(code)
    raise AssertionError("README.md has no SDK snippet ending in serve(Widgets())")


async def _run_script(directory: str, resource: str) -> asyncio.subprocess.Process:
    script = Path(directory) / "widgets.py"
    script.write_text(readme_plugin().replace('"example.com/widget"', f'"{resource}"'))
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        env={**os.environ, "KUBEDEVICE_PLUGIN_DIR": directory},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def test_serve_uses_the_env_plugin_dir_and_prints_lifecycle_events(plugin_dir: str) -> None:
    async with FakeKubelet(plugin_dir) as kubelet:
        process = await _run_script(plugin_dir, "example.com/widget")
        assert process.stdout is not None
        kinds: list[str] = []
        try:
            registration = await kubelet.wait_registrations(1)
            assert registration.request.resource_name == "example.com/widget"
            async with asyncio.timeout(20):
                while "registered" not in kinds:
                    kinds.append((await process.stdout.readline()).decode().split()[0])
        finally:
            process.send_signal(signal.SIGTERM)
            async with asyncio.timeout(20):
                rest, stderr = await process.communicate()
    assert process.returncode == 0, stderr.decode()
    kinds += [line.split()[0] for line in rest.decode().splitlines()]
    assert kinds[:3] == ["devices", "serving", "registered"] and kinds[-1] == "stopped", kinds


async def test_serve_refuses_a_bad_resource_name_in_one_line(plugin_dir: str) -> None:
    process = await _run_script(plugin_dir, "widget")
    async with asyncio.timeout(20):
        _, stderr = await process.communicate()
    assert process.returncode == 2
    lines = stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: widgets.py: resource name 'widget' must be"), lines


class Widgets(DevicePlugin):
    resource_name = "example.com/widget"
    poll_interval = 0.01

    def __init__(self) -> None:
        self.calls = 0
        self.broken = False

    async def devices(self) -> Sequence[Device]:
        self.calls += 1
        if self.broken:
            raise FileNotFoundError(2, "No such file or directory", "/sys/class/widget")
        return [Device("w0"), Device("w1")]


async def test_the_plugin_dir_is_waited_for_not_created(
    plugin_dir: str, caplog: pytest.LogCaptureFixture
) -> None:
    directory = os.path.join(plugin_dir, "device-plugins")
    events: list[LifecycleEvent] = []
    caplog.set_level(logging.INFO, logger="kubedevice")
    async with PluginServer(Widgets(), directory, poll_interval=0.02, on_event=events.append) as server:
        await wait_until(lambda: any(e.kind == EventKind.WAITING for e in events), what="a waiting event")
        assert not exists(directory)  # the kubelet owns it
        os.mkdir(directory)
        async with FakeKubelet(directory) as kubelet:
            await kubelet.wait_registrations(1)
            await wait_until(lambda: server.registrations == 1, what="the plugin to see its registration")
    waiting = [e for e in events if e.kind == EventKind.WAITING]
    assert [e.fields for e in waiting] == [{"path": directory}]  # said once, not per poll
    # One line says it, not a second one about inotify being unavailable.
    said = [r.getMessage() for r in caplog.records if directory in r.getMessage()]
    assert said == [f"waiting for the plugin directory at {directory}"], said


async def test_a_failing_device_source_backs_off_logs_once_and_turns_unhealthy(
    plugin_dir: str, caplog: pytest.LogCaptureFixture
) -> None:
    plugin = Widgets()
    async with FakeKubelet(plugin_dir) as kubelet, PluginServer(plugin, plugin_dir):
        await kubelet.wait_registrations(1)
        await kubelet.wait_health({"w0": "Healthy", "w1": "Healthy"})
        with caplog.at_level(logging.INFO, logger="kubedevice.plugin.inventory"):
            plugin.broken = True
            calls = plugin.calls
            await kubelet.wait_health({"w0": "Unhealthy", "w1": "Unhealthy"})
            await wait_until(lambda: plugin.calls >= calls + 6, what="six more tries")
            # Backoff: 0.01 s doubling; 6 tries at a fixed 0.01 s would have made ~100 calls by now.
            failed = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
            assert len(failed) == 1 and "No such file or directory" in failed[0], failed
            plugin.broken = False
            await kubelet.wait_health({"w0": "Healthy", "w1": "Healthy"})
        assert any("works again" in r.getMessage() for r in caplog.records)


class OneListThenEnds(DevicePlugin):
    """A pushed source written as a one-shot: yields one list, then its watch_devices() returns."""

    resource_name = "example.com/widget"
    poll_interval = 0.01

    def __init__(self) -> None:
        self.starts: list[float] = []

    async def watch_devices(self) -> AsyncIterator[Sequence[Device]]:
        self.starts.append(time.monotonic())
        yield [Device("w0")]


async def test_a_device_source_that_ends_is_restarted_with_backoff_and_logged_once(
    plugin_dir: str, caplog: pytest.LogCaptureFixture
) -> None:
    plugin = OneListThenEnds()
    with caplog.at_level(logging.INFO, logger="kubedevice.plugin.inventory"):
        async with FakeKubelet(plugin_dir) as kubelet, PluginServer(plugin, plugin_dir):
            await kubelet.wait_registrations(1)
            await wait_until(lambda: len(plugin.starts) >= 7, what="six restarts of the source")
            await kubelet.wait_health({"w0": "Healthy"})  # an ended source's last list stands
    # The waits double from the poll interval, as for a failing source; each is a lower bound that holds
    # on any machine (before, every restart came one poll interval, 10 ms, after the last).
    gaps = [later - earlier for earlier, later in zip(plugin.starts, plugin.starts[1:], strict=False)]
    for i, gap in enumerate(gaps[:6]):
        assert gap >= 0.9 * 0.01 * 2**i, gaps
    ended = [r for r in caplog.records if "ended" in r.getMessage()]
    assert len(ended) == 1 and ended[0].levelno == logging.WARNING, [r.getMessage() for r in ended]
    assert "watch_devices() returned" in ended[0].getMessage()
