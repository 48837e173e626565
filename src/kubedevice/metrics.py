"""Prometheus metric families made on first use, so that prometheus_client is imported only then.

Importing prometheus_client costs ~20 ms (its package loads its HTTP exposition too: http.server, email,
urllib), a tenth of the node daemon's start-up, and a restarting daemon serves kubelet.sock before anything
is counted or scraped. A holder is itself a collector: it may be registered before or after its families
exist, and what was counted before it was registered is exposed all the same.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import Metric
    from prometheus_client.registry import Collector


class LazyMetrics(abc.ABC):
    """Families made on first use (a subclass makes each in a cached property), exposed on every registry
    handed over.

    `registry` is the one given first (to the constructor or to `register`), else a registry of the
    holder's own, made when first asked for (never the global default: several owners may live in one
    process).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self._registry: CollectorRegistry | None = None
        if registry is not None:
            self.register(registry)

    def register(self, registry: CollectorRegistry) -> None:
        if self._registry is None:
            self._registry = registry
        registry.register(self)

    @property
    def registry(self) -> CollectorRegistry:
        if self._registry is None:
            from prometheus_client import CollectorRegistry  # on first use: see the module's docstring

            self.register(CollectorRegistry())
        assert self._registry is not None
        return self._registry

    @abc.abstractmethod
    def families(self) -> Sequence[Collector]:
        """The holder's families, in exposition order; made on the first call, then the same objects."""

    def collect(self) -> Iterator[Metric]:
        for family in self.families():
            yield from family.collect()
