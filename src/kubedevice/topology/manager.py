"""TopologyManager: the kubelet's topology manager facade (NewManager, Admit, GetAffinity, containers)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubedevice.topology.hint import TopologyHint
from kubedevice.topology.metrics import TopologyMetrics
from kubedevice.topology.numa_info import MachineTopology, NUMAInfo, NUMAInfoError
from kubedevice.topology.options import PolicyOptions, PolicyOptionsError, parse_policy_options
from kubedevice.topology.policy import POLICIES, POLICY_NONE, Policy
from kubedevice.topology.scope import (
    SCOPE_NONE,
    SCOPES,
    AdmitResult,
    HintProvider,
    HintStore,
    PodLike,
    Scope,
)

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry


class TopologyConfigError(ValueError):
    """The topology manager cannot be created as configured; the kubelet would not start."""


def validate_config(policy: str, scope: str) -> None:
    """The kubelet's configuration validation of the two names, with its texts."""
    if policy not in POLICIES:
        names = " ".join(f'"{p}"' for p in POLICIES)
        raise TopologyConfigError(
            f'invalid configuration: topologyManagerPolicy (--topology-manager-policy) "{policy}" '
            f"must be one of: [{names}]"
        )
    if scope not in SCOPES:
        raise TopologyConfigError(
            f'invalid configuration: topologyManagerScope (--topology-manager-scope) "{scope}" '
            'must be one of: "container", or "pod"'
        )


@dataclass(frozen=True, slots=True)
class TopologyConfig:
    policy: str = POLICY_NONE
    scope: str = "container"
    options: Mapping[str, str] | None = None
    #: The TopologyManagerPolicyBetaOptions feature gate (on by default since 1.28).
    beta_options_enabled: bool = True


class TopologyManager:
    """Admits pods (merge, store, allocate) and answers GetAffinity.

    Its metrics go on `registry` when given, else on the registry handed to `metrics.register` later.
    """

    def __init__(
        self,
        policy: Policy,
        scope: str,
        registry: CollectorRegistry | None = None,
        machine: MachineTopology | None = None,
    ) -> None:
        self.policy = policy
        self.scope_name = scope
        #: The machine's layout as read (also for policy none, which never looks at it).
        self.machine = machine
        self.metrics = TopologyMetrics(registry)
        self._store = HintStore()
        self._providers: list[HintProvider] = []
        self._scope = Scope(scope, policy, self._store, self._providers, self.metrics)
        # Hints and allocations must see the same free devices, so aligned admissions run one at a time
        # as the kubelet admits every pod; without a policy, pods of unrelated resources stay concurrent.
        self._serial = asyncio.Lock() if policy.name != POLICY_NONE else None

    @property
    def numa_info(self) -> NUMAInfo:
        return self.policy.numa_info

    def add_hint_provider(self, provider: HintProvider) -> None:
        self._providers.append(provider)

    async def admit(self, pod: PodLike) -> AdmitResult:
        self.metrics.admission_requests.inc()
        started = time.monotonic()
        if self._serial is None:
            result = await self._scope.admit(pod)
        else:
            async with self._serial:
                result = await self._scope.admit(pod)
        # Whole milliseconds, truncated, as the kubelet records them.
        self.metrics.admission_duration_ms.observe(float(int((time.monotonic() - started) * 1000)))
        if not result.admit:
            self.record_rejection(result.reason)
        return result

    def record_rejection(self, reason: str) -> None:
        """kubelet_admission_rejections_total{reason}: for this manager's and any other admit handler's."""
        self.metrics.admission_rejections.labels(reason=reason).inc()

    def get_affinity(self, pod_uid: str, container_name: str) -> TopologyHint:
        return self._store.get_affinity(pod_uid, container_name)

    def pod_hints(self, pod_uid: str) -> dict[str, TopologyHint]:
        return self._store.pod_hints(pod_uid)

    def add_container(self, pod_uid: str, container_name: str, container_id: str) -> None:
        self._store.add_container(pod_uid, container_name, container_id)

    def remove_container(self, container_id: str) -> None:
        self._store.remove_container(container_id)

    def remove_pod(self, pod_uid: str) -> None:
        self._store.remove_pod(pod_uid)


def new_manager(
    machine: MachineTopology, config: TopologyConfig, registry: CollectorRegistry | None = None
) -> TopologyManager:
    """NewManager's checks in the kubelet's order; any failure is a TopologyConfigError with its text."""
    if config.policy == POLICY_NONE:
        # Options are not parsed and neither the scope nor the node count is checked.
        return TopologyManager(Policy(POLICY_NONE, NUMAInfo(())), SCOPE_NONE, registry, machine)
    try:
        options: PolicyOptions = parse_policy_options(config.options or {}, config.beta_options_enabled)
        numa_info = NUMAInfo.from_machine(machine, options.prefer_closest_numa)
    except (PolicyOptionsError, NUMAInfoError) as e:
        raise TopologyConfigError(str(e)) from None
    if len(numa_info.nodes) > options.max_allowable_numa_nodes:
        raise TopologyConfigError(
            f"unsupported on machines with more than {options.max_allowable_numa_nodes} NUMA Nodes"
        )
    if config.policy not in POLICIES:
        raise TopologyConfigError(f'unknown policy: "{config.policy}"')
    if config.scope not in SCOPES:
        raise TopologyConfigError(f'unknown scope: "{config.scope}"')
    return TopologyManager(Policy(config.policy, numa_info, options), config.scope, registry, machine)
