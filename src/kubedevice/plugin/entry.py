"""`serve()`: the one call a plugin's script makes; runs a DevicePlugin beside the kubelet until stopped."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path

from kubedevice.api.constants import PLUGIN_DIR_ENV
from kubedevice.plugin.base import DevicePlugin
from kubedevice.plugin.errors import ConfigError
from kubedevice.plugin.events import LifecycleEvent
from kubedevice.plugin.server import PluginServer


def serve(
    plugin: DevicePlugin,
    plugin_dir: str | None = None,
    *,
    api: str | None = None,
    kubelet_dir: str | Path | None = None,
    print_events: bool = True,
    **options: object,
) -> None:
    """Run `plugin` until SIGTERM or SIGINT (blocking).

    The one call a plugin's script makes, last: it runs its own event loop, so call it outside one (from
    a test or an async program, use `PluginServer` or `FacesServer`). `api` picks the face:
    "device-plugin" (the default when `resource_name` is set), "dra" (the default when only `driver_name`
    is set) or "both" (disjoint devices, by `Device.api`). Paths come from one kubelet folder,
    `kubelet_dir`, else `$KUBEDEVICE_KUBELET_DIR`, else /var/lib/kubelet: the device plugin directory is
    its `device-plugins` unless `plugin_dir` or `$KUBEDEVICE_PLUGIN_DIR` names another, and the DRA
    face's sockets and state live in its `plugins_registry` and `plugins`. CDI spec files (the one
    `cdi_spec()` returns and, on the DRA face, one per prepared claim) go into the plugin's `cdi_spec_dir`
    when it sets one (for the DRA face, `dra_options={"cdi_spec_dir": ...}` sets it too); else beside a
    real kubelet (cluster mode, or the kubelet folder /var/lib/kubelet) into /var/run/cdi, where the
    container runtimes read them; else into `<kubelet_dir>/cdi`, so that a plugin tried beside
    `kubedevice node --root-dir DIR` writes nothing outside DIR (logged once at INFO). Each lifecycle event
    (waiting, serving, registered, kubelet restart, re-registered, prepare, stopped...) is printed as one
    line on stdout unless `print_events` is False. A configuration error is one line on stderr and exit
    code 2. Among the options: `metrics_port=9402` serves Prometheus metrics, `plugin_watcher=True`
    registers through the kubelet's plugins_registry folder instead of kubelet.sock, `use_inotify=False`
    polls for kubelet restarts; for DRA `backend`, `kubeconfig`, `node_name`, `rolling_update_uid`,
    `registration_socket_file` and `dra_options` (DRAServer's). SIGHUP makes a device plugin serve a new
    socket and register again.
    """
    from kubedevice.plugin.dra.backend import cluster_mode
    from kubedevice.plugin.dra.paths import cdi_spec_dir, resolve_kubelet_dir
    from kubedevice.plugin.dra.runner import FacesServer, default_api

    # The kubelet's layout: its device plugin folder sits in the kubelet folder, unless named apart.
    kubelet = resolve_kubelet_dir(kubelet_dir)
    directory = plugin_dir or os.environ.get(PLUGIN_DIR_ENV) or str(kubelet / "device-plugins")
    command = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "serve"
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    chosen = api or default_api(plugin)
    on_event = print_event if print_events else None

    # Printed events on the terminal the log goes to: the log says them at debug level, so each shows once.
    options.setdefault("log_events", not (print_events and events_share_the_log()))

    async def main() -> None:
        if chosen == "device-plugin":
            options.setdefault(
                "cdi_spec_dir", cdi_spec_dir(plugin.cdi_spec_dir, kubelet, cluster=cluster_mode(None))
            )
            server = PluginServer(plugin, directory, handle_signals=True, on_event=on_event, **options)  # type: ignore[arg-type]
            await server.run()
            return
        faces = FacesServer(
            plugin,
            chosen,
            kubelet_dir=kubelet_dir,
            plugin_dir=directory,
            handle_signals=True,
            on_event=on_event,
            **options,  # type: ignore[arg-type]
        )
        await faces.run()

    try:
        asyncio.run(main())
    except ConfigError as exc:
        print(f"error: {command}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def events_share_the_log() -> bool:
    """stdout, where events are printed, and stderr, where the log goes, are one terminal: a line the
    log would say for an event would show twice."""
    try:
        out, err = os.fstat(sys.stdout.fileno()), os.fstat(sys.stderr.fileno())
    except (OSError, ValueError, AttributeError):  # closed, or replaced by an object without a descriptor
        return False
    return sys.stdout.isatty() and sys.stderr.isatty() and out.st_rdev == err.st_rdev


def print_event(event: LifecycleEvent) -> None:
    """Print one lifecycle event as its one stable line (what `kubedevice plugin ...` prints too)."""
    print(event.line(), flush=True)
