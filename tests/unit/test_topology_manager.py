"""NewManager's checks and order, Admit per scope with its metrics, and the hint store."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kubedevice.topology import (
    TopologyConfig,
    TopologyConfigError,
    TopologyHint,
    TopologyManager,
    new_manager,
    synthetic_topology,
    validate_config,
)
from kubedevice.topology.policy import ProviderHints
from tests.unit.topology_notation import D4, h, hs, machine


@dataclass(frozen=True)
class C:
    name: str


@dataclass(frozen=True)
class P:
    uid: str
    init_containers: list[C] = field(default_factory=list)
    containers: list[C] = field(default_factory=list)


class AdmissionFailure(Exception):
    admission_reason = "SomeTypedError"


@dataclass
class Provider:
    """A provider answering from tables, recording what it saw stored when asked to allocate."""

    manager: TopologyManager | None = None
    per_container: dict[str, ProviderHints] = field(default_factory=dict)
    per_pod: ProviderHints = None
    fail_on: dict[str, Exception] = field(default_factory=dict)
    seen: list[tuple[str, TopologyHint]] = field(default_factory=list)

    def get_topology_hints(self, pod: Any, container: Any) -> ProviderHints:
        return self.per_container.get(container.name)

    def get_pod_topology_hints(self, pod: Any) -> ProviderHints:
        return self.per_pod

    async def allocate(self, pod: Any, container: Any) -> None:
        assert self.manager is not None
        self.seen.append((container.name, self.manager.get_affinity(pod.uid, container.name)))
        if container.name in self.fail_on:
            raise self.fail_on[container.name]


def make(
    policy: str, scope: str = "container", nodes: int = 2, **options: str
) -> tuple[TopologyManager, Provider, CollectorRegistry]:
    registry = CollectorRegistry()
    tm = new_manager(synthetic_topology(nodes), TopologyConfig(policy, scope, options), registry)
    provider = Provider(tm)
    tm.add_hint_provider(provider)
    return tm, provider, registry


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


POD = P("uid-1", [C("init")], [C("app1"), C("app2")])


def test_config_validation_texts() -> None:
    with pytest.raises(TopologyConfigError) as err:
        validate_config("strict", "container")
    assert str(err.value) == (
        'invalid configuration: topologyManagerPolicy (--topology-manager-policy) "strict" must be one of: '
        '["none" "best-effort" "restricted" "single-numa-node"]'
    )
    with pytest.raises(TopologyConfigError) as err:
        validate_config("none", "node")
    assert str(err.value) == (
        'invalid configuration: topologyManagerScope (--topology-manager-scope) "node" must be one of: '
        '"container", or "pod"'
    )


def test_policy_none_checks_nothing() -> None:
    tm = new_manager(
        synthetic_topology(20), TopologyConfig("none", "bogus", {"bogus": "x"}), CollectorRegistry()
    )
    assert tm.policy.name == "none" and tm.scope_name == "none"


@pytest.mark.parametrize(
    ("nodes", "config", "message"),
    [
        # Options are parsed before the NUMA count is looked at, which comes before the names.
        (9, TopologyConfig("bogus", "bogus", {"bogus": "1"}),
         'unknown Topology Manager Policy option: "bogus"'),
        (9, TopologyConfig("bogus", "bogus"), "unsupported on machines with more than 8 NUMA Nodes"),
        (17, TopologyConfig("restricted", "pod", {"max-allowable-numa-nodes": "16"}),
         "unsupported on machines with more than 16 NUMA Nodes"),
        (8, TopologyConfig("bogus", "bogus"), 'unknown policy: "bogus"'),
        (8, TopologyConfig("restricted", "bogus"), 'unknown scope: "bogus"'),
    ],
)  # fmt: skip
def test_new_manager_checks_in_the_kubelet_order(nodes: int, config: TopologyConfig, message: str) -> None:
    with pytest.raises(TopologyConfigError) as err:
        new_manager(synthetic_topology(nodes), config, CollectorRegistry())
    assert str(err.value) == message


def test_prefer_closest_without_distances_fails_at_creation() -> None:
    with pytest.raises(TopologyConfigError, match="error getting NUMA distances from cadvisor"):
        new_manager(
            machine(2),
            TopologyConfig("best-effort", "container", {"prefer-closest-numa-nodes": "true"}),
            CollectorRegistry(),
        )
    tm = new_manager(
        machine(4, D4),
        TopologyConfig("best-effort", "container", {"prefer-closest-numa-nodes": "1"}),
        CollectorRegistry(),
    )
    assert tm.numa_info.distances[0] == D4[0] and tm.policy.options.prefer_closest_numa


async def test_container_scope_stores_each_hint_before_allocating() -> None:
    tm, provider, registry = make("single-numa-node")
    provider.per_container = {
        "init": {"gpu": hs("{1}T")},
        "app1": {"gpu": hs("{0}T", "{1}T", "{0,1}F")},
        "app2": {},
    }
    result = await tm.admit(POD)
    assert result.admit
    assert provider.seen == [("init", h("{1}T")), ("app1", h("{0}T")), ("app2", h("nilT"))]
    assert tm.pod_hints("uid-1") == {"init": h("{1}T"), "app1": h("{0}T"), "app2": h("nilT")}
    assert value(registry, "kubelet_topology_manager_admission_requests_total") == 1
    assert value(registry, "kubelet_topology_manager_admission_errors_total") == 0
    assert (
        value(
            registry,
            "kubelet_container_aligned_compute_resources_count",
            boundary="numa_node",
            scope="container",
        )
        == 3
    )
    assert value(registry, "kubelet_topology_manager_admission_duration_ms_count") == 1


async def test_container_scope_refusal_stops_at_the_refused_container() -> None:
    tm, provider, registry = make("restricted")
    provider.per_container = {"init": {"gpu": hs("{0}T")}, "app1": {"gpu": hs("{0,1}F")}}
    result = await tm.admit(POD)
    assert (result.admit, result.reason, result.message) == (
        False, "TopologyAffinityError", "Resources cannot be allocated with Topology locality"
    )  # fmt: skip
    # The refusal carries what the policy could not merge, for the daemon to say why.
    assert (result.container, result.hints) == ("app1", ({"gpu": hs("{0,1}F")},))
    # Earlier containers keep their hint and allocation, as in the kubelet.
    assert provider.seen == [("init", h("{0}T"))] and tm.get_affinity("uid-1", "init") == h("{0}T")
    assert tm.get_affinity("uid-1", "app1") == TopologyHint()
    assert value(registry, "kubelet_topology_manager_admission_errors_total") == 1
    assert value(registry, "kubelet_admission_rejections_total", reason="TopologyAffinityError") == 1


async def test_pod_scope_stores_one_hint_for_every_container() -> None:
    tm, provider, registry = make("single-numa-node", "pod")
    provider.per_pod = {"gpu": hs("{0}T", "{1}T", "{0,1}F"), "nic": hs("{1}T", "{0,1}F")}
    assert (await tm.admit(POD)).admit
    assert provider.seen == [("init", h("{1}T")), ("app1", h("{1}T")), ("app2", h("{1}T"))]
    assert (
        value(
            registry, "kubelet_container_aligned_compute_resources_count", boundary="numa_node", scope="pod"
        )
        == 1
    )


@pytest.mark.parametrize("scope", ["container", "pod"])
async def test_admit_16_best_effort_admits_restricted_refuses(scope: str) -> None:
    for policy, admitted in (("best-effort", True), ("restricted", False), ("single-numa-node", False)):
        tm, provider, _ = make(policy, scope)
        provider.per_container = {"app1": {"r": hs("{0,1}F")}}
        provider.per_pod = {"r": hs("{0,1}F")}
        result = await tm.admit(P("u", [], [C("app1")]))
        assert result.admit is admitted
        assert result.reason == ("" if admitted else "TopologyAffinityError")
        if not admitted:  # the pod scope merges the pod's hints, for no one container
            assert result.container == ("app1" if scope == "container" else "")
            assert result.hints == ({"r": hs("{0,1}F")},)


async def test_provider_errors_become_rejections() -> None:
    tm, provider, registry = make("best-effort")
    provider.fail_on = {
        "app1": RuntimeError("requested number of devices unavailable for r. Requested: 2, Available: 1")
    }
    result = await tm.admit(POD)
    assert (result.reason, result.message) == (
        "UnexpectedAdmissionError",
        "Allocate failed due to requested number of devices unavailable for r. "
        "Requested: 2, Available: 1, which is unexpected",
    )
    provider.fail_on = {"init": AdmissionFailure("typed")}
    result = await tm.admit(P("uid-2", [C("init")]))
    assert (result.reason, result.message) == ("SomeTypedError", "typed")
    assert value(registry, "kubelet_topology_manager_admission_errors_total") == 2
    assert value(registry, "kubelet_admission_rejections_total", reason="UnexpectedAdmissionError") == 1


async def test_none_policy_allocates_without_hints_and_counts_requests_only() -> None:
    tm, provider, registry = make("none")
    provider.per_container = {"app1": {"r": []}}
    assert (await tm.admit(POD)).admit
    assert [name for name, _ in provider.seen] == ["init", "app1", "app2"]
    assert all(hint == TopologyHint() for _, hint in provider.seen) and tm.pod_hints("uid-1") == {}
    provider.fail_on = {"app2": RuntimeError("boom")}
    assert not (await tm.admit(POD)).admit
    assert value(registry, "kubelet_topology_manager_admission_requests_total") == 2
    assert value(registry, "kubelet_topology_manager_admission_errors_total") == 0


async def test_remove_container_keeps_a_hint_another_id_still_uses() -> None:
    tm, provider, _ = make("best-effort")
    provider.per_container = {"c": {"r": hs("{0}T")}}
    store_hint = h("{0}T")
    assert (await tm.admit(P("u", [], [C("c")]))).admit
    tm.add_container("u", "c", "id-1")
    tm.add_container("u", "c", "id-2")  # the container restarted
    tm.remove_container("id-1")
    assert tm.get_affinity("u", "c") == store_hint
    tm.remove_container("id-2")
    assert tm.get_affinity("u", "c") == TopologyHint() and tm.pod_hints("u") == {}
    tm.remove_container("unknown")


def test_duration_histogram_buckets_are_0_05_ms_doubling() -> None:
    _, _, registry = make("none")
    bounds = [
        s.labels["le"]
        for m in registry.collect()
        if m.name == "kubelet_topology_manager_admission_duration_ms"
        for s in m.samples
        if s.name.endswith("_bucket")
    ]
    assert bounds[0] == "0.05" and bounds[-2] == "819.2" and bounds[-1] == "+Inf" and len(bounds) == 16
