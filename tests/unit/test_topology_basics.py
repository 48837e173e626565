"""Bitmask, hint, policy options and NUMA info: the kubelet's rules and error texts."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubedevice.topology import BitMask, BitMaskError, NUMAInfoError, TopologyHint, iterate_bitmasks
from kubedevice.topology.bitmask import narrowest
from kubedevice.topology.numa_info import NUMAInfo, read_topology, synthetic_topology
from kubedevice.topology.options import (
    PolicyOptions,
    PolicyOptionsError,
    parse_option_pairs,
    parse_policy_options,
)
from tests.unit.topology_notation import h


@pytest.mark.parametrize("bit", [-1, 64, 100])
def test_bits_outside_0_63_fail_with_the_kubelet_text(bit: int) -> None:
    for make in (lambda: BitMask.of(bit), lambda: BitMask().add(bit), lambda: BitMask.of(1).remove(bit)):
        with pytest.raises(BitMaskError, match=r"^bit number must be in range 0-63$"):
            make()
    assert not BitMask.filled().is_set(bit)


def test_bitmask_operations() -> None:
    m = BitMask.of(0, 2)
    assert m.count() == 2 and m.bits() == [0, 2] and str(m) == "{0,2}"
    assert m.add(5).bits() == [0, 2, 5] and m.remove(0).bits() == [2]
    assert m.and_(BitMask.of(2, 3)).bits() == [2] and m.or_(BitMask.of(3), BitMask.of(4)).bits() == [
        0,
        2,
        3,
        4,
    ]
    assert m.any_set([1, 2]) and not m.any_set([]) and not m.any_set([1, 3])
    assert BitMask.filled().count() == 64 and BitMask().is_empty() and not m.is_empty()
    assert m.is_less_than(BitMask.of(3)) and BitMask.of(3).is_greater_than(m)


def test_narrower_compares_counts_then_integer_values() -> None:
    assert BitMask.of(1, 2).is_narrower_than(BitMask.of(0, 3))  # 6 < 9, though 0 is the lowest bit
    assert BitMask.of(3).is_narrower_than(BitMask.of(0, 1))
    assert not BitMask.of(0, 1).is_narrower_than(BitMask.of(0, 1))
    assert narrowest(BitMask.of(0, 3), BitMask.of(1, 2)) == BitMask.of(1, 2)


def test_iterate_bitmasks_by_size_then_lexicographic_order_of_the_list() -> None:
    assert [str(m) for m in iterate_bitmasks([0, 1, 2])] == [
        "{0}", "{1}", "{2}", "{0,1}", "{0,2}", "{1,2}", "{0,1,2}"
    ]  # fmt: skip


def test_hint_equality_ordering_and_json() -> None:
    assert TopologyHint() == h("nilF") and h("{0}T") != h("{0}F") and h("nilT") != h("{0}T")
    assert h("{0,1}T").less_than(h("{0}F")) and h("{0}F").less_than(h("{1}F"))
    assert h("{0}T").to_json() == {"numaNodes": [0], "preferred": True}
    assert h("nilF").to_json() == {"numaNodes": None, "preferred": False}


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, PolicyOptions(False, 8)),
        ({"prefer-closest-numa-nodes": "T"}, PolicyOptions(True, 8)),
        ({"prefer-closest-numa-nodes": "FALSE", "max-allowable-numa-nodes": "+16"}, PolicyOptions(False, 16)),
        ({"max-allowable-numa-nodes": "8"}, PolicyOptions(False, 8)),
    ],
)
def test_policy_options_accepted_like_go(options: dict[str, str], expected: PolicyOptions) -> None:
    assert parse_policy_options(options) == expected


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bogus": "1"}, 'unknown Topology Manager Policy option: "bogus"'),
        (
            {"prefer-closest-numa-nodes": "yes"},
            'bad value for option "prefer-closest-numa-nodes": '
            'strconv.ParseBool: parsing "yes": invalid syntax',
        ),
        (
            {"prefer-closest-numa-nodes": "tRUE"},
            'bad value for option "prefer-closest-numa-nodes": '
            'strconv.ParseBool: parsing "tRUE": invalid syntax',
        ),
        *(
            (
                {"max-allowable-numa-nodes": v},
                'unable to convert policy option to integer "max-allowable-numa-nodes": '
                f'strconv.Atoi: parsing "{v}": invalid syntax',
            )
            for v in (" 8", "1_0", "", "8.0", "0x10", "-")
        ),
        (
            {"max-allowable-numa-nodes": "99999999999999999999"},
            'unable to convert policy option to integer "max-allowable-numa-nodes": '
            'strconv.Atoi: parsing "99999999999999999999": value out of range',
        ),
        (
            {"max-allowable-numa-nodes": "7"},
            'the minimum value of "max-allowable-numa-nodes" should not be less than 8',
        ),
    ],
)
def test_policy_option_errors_are_the_kubelet_texts(options: dict[str, str], message: str) -> None:
    with pytest.raises(PolicyOptionsError) as err:
        parse_policy_options(options)
    assert str(err.value) == message


def test_beta_option_needs_its_gate() -> None:
    with pytest.raises(PolicyOptionsError) as err:
        parse_policy_options({"max-allowable-numa-nodes": "8"}, beta_options_enabled=False)
    assert str(err.value) == (
        "Topology Manager Policy Beta-level Options not enabled, "
        'but option "max-allowable-numa-nodes" provided'
    )
    assert parse_policy_options(
        {"prefer-closest-numa-nodes": "1"}, beta_options_enabled=False
    ).prefer_closest_numa


def test_option_pairs_flag() -> None:
    assert parse_option_pairs("a=1, b=x=y,,") == {"a": "1", "b": "x=y"}
    with pytest.raises(ValueError, match="'oops' is not key=value"):
        parse_option_pairs("a=1,oops")


def _node(root: Path, name: str, distance: str | None) -> None:
    (root / name).mkdir(parents=True)
    if distance is not None:
        (root / name / "distance").write_text(distance + "\n")


def test_sysfs_nodes_in_lexical_order_with_distances(tmp_path: Path) -> None:
    for i in (0, 1, 2, 10):
        _node(tmp_path, f"node{i}", " ".join("10" if j == i else "20" for j in range(11)))
    (tmp_path / "possible").write_text("0-10\n")
    (tmp_path / "nodexyz").mkdir()
    topo = read_topology(tmp_path, tmp_path / "no-cpus")
    assert [n.id for n in topo.nodes] == [0, 1, 10, 2] and topo.source == "sysfs" and not topo.warnings
    assert topo.nodes[2].distances is not None and topo.nodes[2].distances[10] == 10


def test_unreadable_distance_is_a_warning_and_fails_only_prefer_closest(tmp_path: Path) -> None:
    _node(tmp_path, "node0", "10 20")
    _node(tmp_path, "node1", None)
    topo = read_topology(tmp_path, tmp_path / "no-cpus")
    assert topo.nodes[1].distances is None and "node1/distance" in topo.warnings[0]
    assert NUMAInfo.from_machine(topo, prefer_closest=False).nodes == (0, 1)
    with pytest.raises(
        NUMAInfoError, match=r"^cannot discover NUMA topology: error getting NUMA distances from cadvisor$"
    ):
        NUMAInfo.from_machine(topo, prefer_closest=True)


def test_without_node_folders_one_pseudo_node_per_socket(tmp_path: Path) -> None:
    for cpu, socket in (("cpu0", "0"), ("cpu1", "1"), ("cpu2", "1")):
        (tmp_path / cpu / "topology").mkdir(parents=True)
        (tmp_path / cpu / "topology" / "physical_package_id").write_text(socket + "\n")
    topo = read_topology(tmp_path / "missing", tmp_path)
    assert [(n.id, n.distances) for n in topo.nodes] == [(0, None), (1, None)] and topo.source == "sockets"


def test_non_contiguous_ids_with_prefer_closest_fail_loudly(tmp_path: Path) -> None:
    _node(tmp_path, "node0", "10 20")
    _node(tmp_path, "node2", "20 10")
    topo = read_topology(tmp_path, tmp_path)
    with pytest.raises(NUMAInfoError, match=r"NUMA node IDs 0..n-1 .* got \[0, 2\]"):
        NUMAInfo.from_machine(topo, prefer_closest=True)


def test_synthetic_layout_has_10_local_and_20_remote() -> None:
    topo = synthetic_topology(3)
    assert [n.distances for n in topo.nodes] == [(10, 20, 20), (20, 10, 20), (20, 20, 10)]
    assert topo.source == "--numa-nodes 3"
    with pytest.raises(NUMAInfoError, match="at least 1, got 0"):
        synthetic_topology(0)
