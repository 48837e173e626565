"""List-type device attributes (DRAListTypeAttributes, alpha upstream): read and checked in slices, seen
by CEL as lists (with `includes()`), and compared as sets by `matchAttribute`. The CEL cases are upstream's
(cel/compile_test.go), the allocation ones upstream's allocator tests' list-attributes cases."""

from __future__ import annotations

from typing import Any

import pytest

from kubedevice.resource.fields import DocumentError
from kubedevice.resource.slice_document import parse_slice
from kubedevice.resource.slice_model import AttributeValue, SliceDevice
from kubedevice.scheduler.allocator import Unschedulable, allocate
from kubedevice.scheduler.cel import CelDevice, CelRuntimeError, CelSelectors
from tests.dra_allocator_helpers import GPU, claim, dev, match, picked, pool, req, request

DRA = "dra.example.com"


@pytest.fixture(scope="module")
def cel() -> CelSelectors:
    return CelSelectors()


def slice_with(*attributes: dict[str, Any], devices: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": "s"},
        "spec": {
            "driver": DRA,
            "nodeName": "node-1",
            "pool": {"name": "p", "resourceSliceCount": 1},
            "devices": [
                {"name": f"d{i}", "attributes": attributes[i] if i < len(attributes) else {}}
                for i in range(max(devices, len(attributes)))
            ],
        },
    }


# --- reading ---------------------------------------------------------------------------------------------


def test_list_attributes_are_read_as_tuples_of_their_elements() -> None:
    s = parse_slice(
        slice_with(
            {
                "ids": {"ints": [1, 2, 2]},
                "flags": {"bools": [True]},
                "names": {"strings": ["fish", ""]},
                "versions": {"versions": ["1.0.0", "2.0.0-rc.1"]},
                "one": {"int": 3},
            }
        ),
        "v1",
        "f.yaml",
    )
    attributes = s.devices[0].attributes
    assert attributes["ids"] == AttributeValue("ints", (1, 2, 2))
    assert attributes["flags"] == AttributeValue("bools", (True,))
    assert attributes["names"].elements == ("fish", "")
    assert attributes["versions"].as_set() == ("version", frozenset({"1.0.0", "2.0.0-rc.1"}))
    assert attributes["one"].as_set() == ("int", frozenset({3}))


BAD: list[tuple[dict[str, Any], str]] = [
    (slice_with({"x": {"ints": []}}), "spec.devices[0].attributes[x].ints: must not be empty"),
    (slice_with({"x": {"ints": 1}}), "spec.devices[0].attributes[x].ints: must be a list, not an integer"),
    (
        slice_with({"x": {"ints": [1, "2"]}}),
        "spec.devices[0].attributes[x].ints[1]: '2' is not a 64-bit integer",
    ),
    (
        slice_with({"x": {"ints": [2**63]}}),
        "spec.devices[0].attributes[x].ints[0]: 9223372036854775808 is not",
    ),
    (slice_with({"x": {"bools": [1]}}), "spec.devices[0].attributes[x].bools[0]: must be true or false"),
    (
        slice_with({"x": {"strings": ["a" * 65]}}),
        "spec.devices[0].attributes[x].strings[0]: has 65 characters",
    ),
    (
        slice_with({"x": {"versions": ["1.0.0", "v1"]}}),
        "spec.devices[0].attributes[x].versions[1]: 'v1' is not a semantic version",
    ),
    (
        slice_with({"x": {"ints": [1], "int": 1}}),
        "spec.devices[0].attributes[x]: must have exactly one of int, bool, string, version, ints",
    ),
    (
        slice_with({"x": {"ints": list(range(40))}, "y": {"strings": ["a"] * 8}, "z": {"int": 1}}),
        "spec.devices[0].attributes: has 49 values (a list's elements each count), at most 48",
    ),
    (
        slice_with({"x": {"ints": [1]}}, devices=65),
        "spec.devices: must have at most 64 items when a device has taints, consumes counters or has list "
        "attributes, has 65",
    ),
]


@pytest.mark.parametrize(("doc", "message"), BAD)
def test_bad_list_attributes_are_refused_naming_the_field(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(DocumentError) as caught:
        parse_slice(doc, "v1", "f.yaml")
    assert str(caught.value).startswith(f"ResourceSlice s: {message}"), str(caught.value)


def test_48_values_and_64_devices_are_within_the_limits() -> None:
    parse_slice(slice_with({"x": {"ints": list(range(47))}, "y": {"int": 1}}), "v1", "f.yaml")
    parse_slice(slice_with({"x": {"ints": [1]}}, devices=64), "v1", "f.yaml")
    parse_slice(slice_with(devices=128), "v1", "f.yaml")


# --- CEL: upstream's cel/compile_test.go cases ------------------------------------------------------------


def device(**attributes: AttributeValue) -> CelDevice:
    return CelDevice.of(DRA, SliceDevice("d", attributes, {}))


def a(kind: str, value: Any) -> AttributeValue:
    return AttributeValue(kind, tuple(value) if isinstance(value, list) else value)  # type: ignore[arg-type]


NAME = 'device.attributes["dra.example.com"].name'
LONG = [f"value-{i}" for i in range(48)]
CEL_CASES: list[tuple[str, str, CelDevice, bool | str]] = [
    (
        "list-result-type-causes-match-error",
        NAME,
        device(name=a("strings", ["fish", "bird"])),
        "CEL result of type list could not be converted to bool",
    ),
    (
        "includes-function-can-evaluate",
        f'{NAME}.includes("fish")',
        device(name=a("strings", ["fish", "bird"])),
        True,
    ),
    ("list-of-bool", f"{NAME}.size() == 2", device(name=a("bools", [True, False])), True),
    ("list-of-int", f"{NAME}.size() == 2", device(name=a("ints", [1, 2])), True),
    ("list-of-string", f"{NAME}.size() == 2", device(name=a("strings", ["fish", "bird"])), True),
    ("list-of-semver", f"{NAME}.size() == 2", device(name=a("versions", ["1.0.0", "2.0.0"])), True),
    ("macro-on-list-of-int", f"{NAME}.exists(x, x > 0)", device(name=a("ints", [1, 2])), True),
    ("macro-on-list-of-string", f'{NAME}.all(x, x != "")', device(name=a("strings", ["fish", "bird"])), True),
    (
        "macro-on-list-of-semver",
        f'{NAME}.all(x, x.isGreaterThan(semver("0.0.1")))',
        device(name=a("versions", ["1.0.0", "2.0.0"])),
        True,
    ),
    ("includes-on-string-scalar", f'{NAME}.includes("fish")', device(name=a("string", "fish")), True),
    ("includes-on-bool-scalar-positive", f"{NAME}.includes(true)", device(name=a("bool", True)), True),
    ("includes-on-bool-scalar-negative", f"{NAME}.includes(true)", device(name=a("bool", False)), False),
    (
        "includes-on-bool-list-positive",
        f"{NAME}.includes(true)",
        device(name=a("bools", [True, False])),
        True,
    ),
    (
        "includes-on-bool-list-negative",
        f"{NAME}.includes(false)",
        device(name=a("bools", [True, True])),
        False,
    ),
    ("includes-on-int-scalar-positive", f"{NAME}.includes(1)", device(name=a("int", 1)), True),
    ("includes-on-int-scalar-negative", f"{NAME}.includes(1)", device(name=a("int", 2)), False),
    ("includes-on-int-list-positive", f"{NAME}.includes(1)", device(name=a("ints", [1, 2])), True),
    ("includes-on-int-list-negative", f"{NAME}.includes(3)", device(name=a("ints", [1, 2])), False),
    (
        "includes-on-string-scalar-negative",
        f'{NAME}.includes("bird")',
        device(name=a("string", "fish")),
        False,
    ),
    (
        "includes-on-string-list-negative",
        f'{NAME}.includes("cat")',
        device(name=a("strings", ["fish", "bird"])),
        False,
    ),
    (
        "includes-on-semver-scalar-positive",
        f'{NAME}.includes(semver("1.0.0"))',
        device(name=a("version", "1.0.0")),
        True,
    ),
    (
        "includes-on-semver-scalar-negative",
        f'{NAME}.includes(semver("2.0.0"))',
        device(name=a("version", "1.0.0")),
        False,
    ),
    (
        "includes-on-semver-list-positive",
        f'{NAME}.includes(semver("1.0.0"))',
        device(name=a("versions", ["1.0.0", "2.0.0"])),
        True,
    ),
    (
        "includes-on-semver-list-negative",
        f'{NAME}.includes(semver("3.0.0"))',
        device(name=a("versions", ["1.0.0", "2.0.0"])),
        False,
    ),
    (
        "includes-on-very-long-list-positive",
        f'{NAME}.includes("value-48")',
        device(name=a("strings", LONG)),
        False,
    ),
    (
        "includes-on-very-long-list-runtime-error",
        f'{NAME}.includes("value-49")',
        device(name=a("strings", [*LONG, "value-48"])),
        "'includes' function cannot be applied to lists longer than 48 values",
    ),
    ("in-operator-on-list", f"1 in {NAME}", device(name=a("ints", [1, 2, 3])), True),
    # Not upstream's cases: a bool never equals a number; a list of any length, written in the expression.
    ("includes-bool-is-not-an-int", f"{NAME}.includes(1)", device(name=a("bools", [True])), False),
    ("includes-on-a-literal-list", "[1, 2, 3].includes(2)", device(), True),
]


@pytest.mark.parametrize(("name", "expression", "dev_", "want"), CEL_CASES, ids=[c[0] for c in CEL_CASES])
def test_cel_sees_list_attributes_as_upstream(
    cel: CelSelectors, name: str, expression: str, dev_: CelDevice, want: bool | str
) -> None:
    cel.compile(expression)
    if isinstance(want, bool):
        assert cel.matches(expression, dev_) is want
    else:
        with pytest.raises(CelRuntimeError) as caught:
            cel.matches(expression, dev_)
        assert caught.value.message == want


def test_a_bad_version_in_a_list_is_the_selectors_runtime_error(cel: CelSelectors) -> None:
    with pytest.raises(CelRuntimeError) as caught:
        cel.matches(f"{NAME}.size() == 1", device(name=a("versions", ["1.x"])))
    assert caught.value.message.startswith("attribute dra.example.com/name: parse semantic version: ")


# --- matchAttribute: upstream's allocator tests' list-attributes cases ------------------------------------


def strings(*values: str) -> AttributeValue:
    return AttributeValue("strings", values)


ATTR = f"{GPU}/stringAttribute"
MATCH_CASES: list[tuple[str, list[AttributeValue], int, bool]] = [
    ("scalar-string-values", [AttributeValue("string", "value1")] * 2, 2, True),
    (
        "list-of-string-values-with-common-elements",
        [strings("value1", "value2", "value3"), strings("value2", "value3", "value4")],
        2,
        True,
    ),
    (
        "list-of-string-values-with-partially-common-elements",
        [strings("value1", "value2"), strings("value2", "value3"), strings("value3", "value1")],
        3,
        False,
    ),
    (
        "mixed-scalar-and-list-with-common-elements",
        [AttributeValue("string", "value1"), strings("value1", "value2")],
        2,
        True,
    ),
    (
        "mixed-scalar-and-list-with-partially-common-elements",
        [AttributeValue("string", "value1"), strings("value1", "value2"), strings("value2", "value3")],
        3,
        False,
    ),
    (
        "mixed-scalar-and-list-without-common-elements",
        [AttributeValue("string", "value1"), strings("value2", "value3")],
        2,
        False,
    ),
    (
        "list-of-int-values-with-common-elements",
        [AttributeValue("ints", (0, 1, 2)), AttributeValue("ints", (1, 2, 3))],
        2,
        True,
    ),
    (
        "list-of-bool-values-with-common-elements",
        [AttributeValue("bools", (True, False)), AttributeValue("bools", (True,))],
        2,
        True,
    ),
    (
        "list-of-version-values-with-common-elements",
        [
            AttributeValue("versions", ("1.0.0", "1.1.0", "2.0.0")),
            AttributeValue("versions", ("1.1.0", "2.0.0", "2.1.0")),
        ],
        2,
        True,
    ),
    (
        "values-of-different-kinds-never-meet",
        [AttributeValue("ints", (1,)), AttributeValue("strings", ("1",))],
        2,
        False,
    ),
]


@pytest.mark.parametrize(
    ("name", "values", "count", "allocated"), MATCH_CASES, ids=[c[0] for c in MATCH_CASES]
)
def test_match_attribute_meets_when_the_sets_intersect(
    cel: CelSelectors, name: str, values: list[AttributeValue], count: int, allocated: bool
) -> None:
    devices = [dev(f"device-{i + 1}", {"stringAttribute": v}) for i, v in enumerate(values)]
    req_ = request([claim("c", req("r", count=count), constraints=(match(ATTR),))], [pool(*devices)])
    if allocated:
        assert picked(allocate(req_, cel)) == [[("r", d.name) for d in devices]]
    else:
        with pytest.raises(Unschedulable):
            allocate(req_, cel)


def test_a_device_given_back_gives_back_its_narrowing(cel: CelSelectors) -> None:
    """{a,b}, then {a} (narrows to {a}), then r2 finds only {b}: the search gives {a} back and takes {b}
    for r1, which the API's rule allows. (Upstream's allocator keeps the narrowed set and fails here.)"""
    devices = [
        dev("d1", {"stringAttribute": strings("a", "b"), "for": AttributeValue("string", "r0")}),
        dev("d2", {"stringAttribute": strings("a"), "for": AttributeValue("string", "r1")}),
        dev("d3", {"stringAttribute": strings("b"), "for": AttributeValue("string", "r1")}),
        dev("d4", {"stringAttribute": strings("b"), "for": AttributeValue("string", "r2")}),
    ]

    def only(name: str) -> tuple[str]:
        return (f'device.attributes["{GPU}"]["for"] == "{name}"',)

    spec = claim(
        "c",
        req("r0", selectors=only("r0")),
        req("r1", selectors=only("r1")),
        req("r2", selectors=only("r2")),
        constraints=(match(ATTR),),
    )
    assert picked(allocate(request([spec], [pool(*devices)]), cel)) == [
        [("r0", "d1"), ("r1", "d3"), ("r2", "d4")]
    ]


def test_the_explanation_names_the_values_of_a_list_constraint(cel: CelSelectors) -> None:
    devices = [
        dev("d1", {"stringAttribute": strings("a", "b")}),
        dev("d2", {"stringAttribute": strings("c")}),
    ]
    req_ = request([claim("c", req("r", count=2), constraints=(match(ATTR),))], [pool(*devices)])
    with pytest.raises(Unschedulable) as caught:
        allocate(req_, cel)
    (one,) = caught.value.explanation
    assert [(r.rule, r.first, r.detail) for r in one.ruled_out] == [
        ("constraint", f"{GPU}/node-1/d2", f"matchAttribute {ATTR}: c, the devices before: a,b")
    ]
