"""Lifecycle events of a running plugin: what the CLI prints, one line each, and what tests wait on."""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kubedevice.plugin.model import Face

log = logging.getLogger(__name__)


class EventKind(enum.StrEnum):
    """What happened to a running plugin; the first word of its event's line."""

    SERVING = "serving"
    """The DevicePlugin service answers on a new socket."""
    WAITING = "waiting"
    """What the server waits for before it can register: the plugin directory or kubelet.sock (said once)."""
    REGISTERED = "registered"
    """The first successful Register with the kubelet."""
    KUBELET_RESTART = "kubelet-restart"
    """kubelet.sock was created again or the plugin's own socket was deleted."""
    REREGISTERED = "re-registered"
    """A successful Register after the first one."""
    REGISTER_FAILED = "register-failed"
    """One Register attempt failed; the server retries with backoff."""
    DEVICES = "devices"
    """The device list changed."""
    ALLOCATE = "allocate"
    """Allocate answered (or refused) one container request."""
    PRE_START = "pre-start"
    """PreStartContainer answered."""
    WATCHER_STATUS = "watcher-status"
    """The kubelet's plugin watcher sent NotifyRegistrationStatus."""
    CDI_SPEC_WRITTEN = "cdi-spec-written"
    """The plugin's CDI spec file was written (at start, before registering, and when its devices change)."""
    CDI_SPEC_REMOVED = "cdi-spec-removed"
    """The plugin's CDI spec file was removed: the server stopped, or no device is left."""
    PREPARE = "prepare"
    """DRA: a claim was prepared by the plugin's hook (or its allocate())."""
    PREPARE_CACHED = "prepare-cached"
    """DRA: a claim prepared before was answered from the state file, without the hook."""
    UNPREPARE = "unprepare"
    """DRA: a claim was unprepared."""
    PUBLISHED = "published"
    """DRA: the driver's healthy devices were handed to the ResourceSlice publisher."""
    STOPPED = "stopped"
    """The server stopped and removed its socket."""


@dataclass(frozen=True)
class LifecycleEvent:
    """One thing that happened to a running plugin, handed to `on_event` handlers as it happens."""

    #: What happened.
    kind: EventKind
    #: The plugin's resource name; on the DRA face, its driver name.
    resource: str
    #: Details by name, e.g. `endpoint` for SERVING and REGISTERED, `healthy`/`unhealthy` for DEVICES.
    fields: dict[str, str] = field(default_factory=dict)
    #: When it happened (seconds since the epoch).
    time: float = field(default_factory=time.time)
    #: The face it happened on: "device-plugin" or "dra".
    face: Face = "device-plugin"

    def line(self) -> str:
        """One stable, greppable line: `<kind> resource=<r> key=value ...` (values are space-free); on the
        DRA face `<kind> driver=<d> key=value ...`."""
        name = "driver" if self.face == "dra" else "resource"
        parts = [str(self.kind), f"{name}={self.resource}"]
        parts.extend(f"{key}={value.replace(' ', '_')}" for key, value in self.fields.items())
        return " ".join(parts)


EventHandler = Callable[[LifecycleEvent], None]


class EventBus:
    """Fans events out to handlers; a failing handler is logged, never allowed to break the server."""

    def __init__(self, resource: str, *, face: Face = "device-plugin", log_events: bool = True) -> None:
        self._resource = resource
        self._face: Face = face
        self._handlers: list[EventHandler] = []
        #: The level of the log lines that say what an event says: INFO, or DEBUG where the events
        #: themselves are printed on the terminal the log goes to (each would be said twice).
        self.said_level = logging.INFO if log_events else logging.DEBUG

    def subscribe(self, handler: EventHandler) -> Callable[[], None]:
        """Add a handler; return a function that removes it again."""
        self._handlers.append(handler)
        return lambda: self._handlers.remove(handler) if handler in self._handlers else None

    def emit(self, kind: EventKind, **fields: str) -> LifecycleEvent:
        event = LifecycleEvent(kind, self._resource, dict(fields), face=self._face)
        if log.isEnabledFor(logging.DEBUG):  # one event per Allocate: its line is made only when shown
            log.debug("event %s", event.line())
        for handler in list(self._handlers):
            try:
                handler(event)
            except Exception:
                log.exception("event handler %r failed on %s", handler, event.kind)
        return event
