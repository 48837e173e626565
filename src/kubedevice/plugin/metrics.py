"""Prometheus metrics of one plugin server, on a registry it owns (never the process-global default)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from kubedevice.plugin.model import Device


class PluginMetrics:
    """The plugin server's Prometheus metrics, labelled with the resource name.

    Devices by health, Allocate answers and Register calls by result, kubelet restarts noticed. The server
    makes one unless given one (`metrics=`); with `metrics_port` it serves them over HTTP.
    """

    def __init__(self, resource: str, registry: CollectorRegistry | None = None) -> None:
        self.resource = resource
        self.registry = registry if registry is not None else CollectorRegistry()
        self.devices = Gauge(
            "kubedevice_plugin_devices",
            "Devices the plugin currently advertises, by health.",
            ["resource_name", "health"],
            registry=self.registry,
        )
        self.allocations = Counter(
            "kubedevice_plugin_allocations",
            "Container allocation requests answered, by result (ok, invalid, error).",
            ["resource_name", "result"],
            registry=self.registry,
        )
        self.registrations = Counter(
            "kubedevice_plugin_registrations",
            "Register calls to the kubelet, by result (ok, failed).",
            ["resource_name", "result"],
            registry=self.registry,
        )
        self.kubelet_restarts = Counter(
            "kubedevice_plugin_kubelet_restarts",
            "Kubelet restarts the plugin noticed (kubelet.sock re-created or its own socket deleted).",
            ["resource_name"],
            registry=self.registry,
        )
        self._http: tuple[WSGIServer, threading.Thread] | None = None

    def observe_devices(self, devices: Sequence[Device]) -> None:
        """Set the device gauges from a new device list (the server calls it on each change)."""
        healthy = sum(1 for d in devices if d.healthy)
        self.devices.labels(self.resource, "healthy").set(healthy)
        self.devices.labels(self.resource, "unhealthy").set(len(devices) - healthy)

    def count_allocation(self, result: str) -> None:
        """Count one container's Allocate answer: result "ok", "invalid" or "error"."""
        self.allocations.labels(self.resource, result).inc()

    def count_registration(self, ok: bool) -> None:
        """Count one Register call to the kubelet, accepted or not."""
        self.registrations.labels(self.resource, "ok" if ok else "failed").inc()

    def count_kubelet_restart(self) -> None:
        """Count one kubelet restart the server noticed."""
        self.kubelet_restarts.labels(self.resource).inc()

    def value(self, name: str, **labels: str) -> float:
        """Current value of one sample (0 if absent); `name` is the exposed sample name."""
        found = self.registry.get_sample_value(name, {"resource_name": self.resource, **labels})
        return 0.0 if found is None else found

    def serve_http(self, port: int, addr: str = "0.0.0.0") -> int:
        """Expose the registry over HTTP in prometheus-client's own thread; return the bound port."""
        server, thread = start_http_server(port, addr=addr, registry=self.registry)
        self._http = (server, thread)
        return int(server.server_address[1])

    async def close(self) -> None:
        """Stop the HTTP server if `serve_http` started one (the server calls it when it stops)."""
        if self._http is not None:
            server, thread = self._http
            self._http = None
            # shutdown() waits for the serving thread's poll loop: not on the event loop.
            await asyncio.to_thread(server.shutdown)
            server.server_close()
            await asyncio.to_thread(thread.join)
