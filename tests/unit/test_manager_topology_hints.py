"""The device manager as hint provider: pod-level requests and generated hints (SPEC §12.4, §12.6)."""

from __future__ import annotations

from kubedevice.manager import Container, Pod
from kubedevice.manager.topology_hints import generate_topology_hints, pod_device_requests
from tests.unit.test_manager_allocator import resource
from tests.unit.topology_notation import hs

GPU, NIC = "gpu", "nic"


def test_pod_request_is_the_larger_of_the_init_peak_and_the_app_sum() -> None:
    """TestGetPodDeviceRequest's two rows."""
    pod = Pod(
        "p",
        init_containers=[Container("i1", {GPU: 2, NIC: 1}), Container("i2", {GPU: 3, NIC: 2})],
        containers=[Container("a1", {GPU: 1, NIC: 1}), Container("a2", {GPU: 1})],
    )
    assert pod_device_requests(pod) == {GPU: 3, NIC: 2}
    pod = Pod(
        "p",
        init_containers=[Container("i1", {GPU: 2, NIC: 1}), Container("i2", {GPU: 2, NIC: 1})],
        containers=[Container("a1", {GPU: 3, NIC: 2}), Container("a2", {GPU: 3, NIC: 2})],
    )
    assert pod_device_requests(pod) == {GPU: 6, NIC: 4}


def test_pod_request_counts_sidecars_beside_later_init_containers_and_the_apps() -> None:
    pod = Pod(
        "p",
        init_containers=[
            Container("side", {GPU: 1}, restart_policy="Always"),
            Container("setup", {GPU: 2}),
        ],
        containers=[Container("app", {GPU: 1})],
    )
    # setup runs beside the sidecar (2 + 1); the app runs beside it too (1 + 1).
    assert pod_device_requests(pod) == {GPU: 3}


def test_free_shortage_gives_only_the_wider_non_preferred_hint() -> None:
    """Two devices per node, another container holds one on each node, request 2 -> [{0,1}F]."""
    devices = resource({"a0": [0], "a1": [0], "b0": [1], "b1": [1]})
    assert generate_topology_hints([0, 1], devices, {"a1", "b1"}, set(), 2) == hs("{0,1}F")


def test_a_device_on_two_nodes_counts_in_every_mask_it_touches() -> None:
    devices = resource({"both": [0, 1], "one": [1]})
    assert generate_topology_hints([0, 1], devices, {"both", "one"}, set(), 2) == hs("{1}T", "{0,1}F")


def test_request_zero_yields_every_mask_with_single_nodes_preferred() -> None:
    devices = resource({"a": [0], "b": [1]})
    assert generate_topology_hints([0, 1], devices, set(), set(), 0) == hs("{0}T", "{1}T", "{0,1}F")


def test_vector_19_one_device_per_node_of_four_with_node_1_taken() -> None:
    devices = resource({f"d{n}": [n] for n in range(4)})
    hints = generate_topology_hints([0, 1, 2, 3], devices, {"d0", "d2", "d3"}, set(), 2)
    assert hints == hs(
        "{0,2}T", "{0,3}T", "{2,3}T", "{0,1,2}F", "{0,1,3}F", "{0,2,3}F", "{1,2,3}F", "{0,1,2,3}F"
    )


def test_reusable_devices_must_touch_the_mask_and_count_toward_the_request() -> None:
    devices = resource({"a0": [0], "b0": [1], "b1": [1], "x": []})
    # a0 is reusable (an init container's): every mask must include node 0.
    assert generate_topology_hints([0, 1], devices, {"b0", "b1"}, {"a0"}, 2) == hs("{0,1}F")
    # A reusable device without topology neither blocks a mask nor counts.
    assert generate_topology_hints([0, 1], devices, {"b0", "b1"}, {"x"}, 2) == hs("{1}T", "{0,1}F")


def test_numa_ids_the_machine_lacks_or_beyond_63_touch_no_mask() -> None:
    devices = resource({"a": [0], "far": [7], "huge": [100]})
    assert generate_topology_hints([0, 1], devices, {"a", "far", "huge"}, set(), 1) == hs("{0}T", "{0,1}F")
    assert generate_topology_hints([0, 1], devices, {"far", "huge"}, set(), 1) == []
