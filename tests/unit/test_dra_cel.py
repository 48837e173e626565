"""CEL selectors in the Kubernetes DRA environment: upstream's compile and match examples, and our texts."""

from __future__ import annotations

import pytest

from kubedevice.resource.capacity import DeviceCapacity
from kubedevice.resource.model import SelectorCompileError, SelectorCompiler
from kubedevice.resource.quantity import Quantity, parse_quantity
from kubedevice.resource.slice_model import AttributeValue, SliceDevice
from kubedevice.scheduler.cel import CelDevice, CelRuntimeError, CelSelectors
from kubedevice.scheduler.semver import parse_semver

DRA = "dra.example.com"
HINT = (
    ". consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() "
    "for optional fields"
)


@pytest.fixture(scope="module")
def cel() -> CelSelectors:
    return CelSelectors()


def device(
    attributes: dict[str, AttributeValue] | None = None, capacity: dict[str, str] | None = None
) -> CelDevice:
    capacities = {k: DeviceCapacity(Quantity.parse(v)) for k, v in (capacity or {}).items()}
    return CelDevice.of(DRA, SliceDevice("d", attributes or {}, capacities))


def a(value: int | bool | str, kind: str | None = None) -> AttributeValue:
    if kind is None:
        kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "string"
    return AttributeValue(kind, value)  # type: ignore[arg-type]


ALL_KINDS = {"bool": a(True), "int": a(1), "string": a("fish"), "version": a("1.0.0", "version")}

MATCHES: list[tuple[str, CelDevice, bool]] = [
    ("true", device(), True),
    ("false", device(), False),
    ('"no-such-domain" in device.attributes', device(), False),
    ('"dra.example.com" in device.attributes', device({"dra.example.com/something": a(True)}), True),
    ('device.driver == "dra.example.com"', device(), True),
    ('device.attributes["dra.example.com"].name', device({"name": a(True)}), True),
    ('device.attributes["dra.example.com"]["name"]', device({"name": a(True)}), True),
    ('cel.bind(dra, device.attributes["dra.example.com"], dra.name)', device({"name": a(True)}), True),
    ('device.attributes["other.example.com"].name', device({"other.example.com/name": a(True)}), True),
    ('device.attributes["dra.example.com"].name > 0', device({"name": a(1)}), True),
    ('device.attributes["dra.example.com"].name == "fish"', device({"name": a("fish")}), True),
    (
        'device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1"))',
        device({"name": a("1.0.0", "version")}),
        True,
    ),
    (
        'device.attributes["dra.example.com"].name.isGreaterThan(semver("v0.0.1", true)) && '
        'isSemver("v1.0.0", true)',
        device({"name": a("1.0.0", "version")}),
        True,
    ),
    (
        'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        device(capacity={"name": "1Mi"}),
        True,
    ),
    (
        '"name" in device.capacity["dra.example.com"] && '
        'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        device(capacity={"name": "1Mi"}),
        True,
    ),
    (
        '!("name" in device.capacity["dra.example.com"]) || '
        'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        device(),
        True,
    ),
    (
        'device.capacity["dra.example.com"].quantity.isGreaterThan(quantity("1Ki")) && '
        'device.attributes["dra.example.com"].bool && device.attributes["dra.example.com"].int > 0 && '
        'device.attributes["dra.example.com"].string == "fish" && '
        'device.attributes["dra.example.com"]["version"].isGreaterThan(semver("0.0.1"))',
        device(ALL_KINDS, {"quantity": "1Mi"}),
        True,
    ),
    ('device.attributes.exists_one(x, x == "dra.example.com")', device({"services": a("v")}), True),
    (
        'device.attributes["dra.example.com"].services.split("example").size() >= 2',
        device({"services": a("s_example_v")}),
        True,
    ),
    (
        'device.attributes["dra.example.com"].services.matches("[^a]?sym")',
        device({"services": a("asymetric")}),
        True,
    ),
    # scenario 34: dra-example-driver's memory selector
    (
        "device.capacity['dra.example.com'].memory.compareTo(quantity('4Gi')) >= 0",
        device(capacity={"memory": "2Gi"}),
        False,
    ),
    (
        "device.capacity['dra.example.com'].memory.compareTo(quantity('4Gi')) >= 0",
        device(capacity={"memory": "16Gi"}),
        True,
    ),
    (
        "device.capacity['dra.example.com'].memory.isLessThan(quantity('4Gi'))",
        device(capacity={"memory": "2Gi"}),
        True,
    ),
    # the quantity library
    ("quantity('1') == quantity('1000m') && quantity('1k') != quantity('1Ki')", device(), True),
    ("isQuantity('1.5Gi') && !isQuantity('1.5 Gi')", device(), True),
    (
        "quantity('1Gi').add(quantity('1Gi')) == quantity('2Gi') && quantity('5').sub(2).asInteger() == 3",
        device(),
        True,
    ),
    (
        "quantity('-3').sign() == -1 && quantity('0').sign() == 0 && quantity('2m').sign() == 1",
        device(),
        True,
    ),
    ("quantity('2.5').isInteger() == false && quantity('2k').isInteger()", device(), True),
    ("quantity('1500m').asApproximateFloat() == 1.5", device(), True),
    ("quantity('1Ki').compareTo(quantity('1k')) == 1", device(), True),
    # the semver library
    (
        "semver('1.2.3').major() == 1 && semver('1.2.3').minor() == 2 && semver('1.2.3').patch() == 3",
        device(),
        True,
    ),
    (
        "semver('1.0.0-alpha').isLessThan(semver('1.0.0')) && semver('1.0.0+build') == semver('1.0.0')",
        device(),
        True,
    ),
    ("semver('1.0.0-alpha.1').compareTo(semver('1.0.0-alpha.beta')) == -1", device(), True),
    ("isSemver('1.2.3') && !isSemver('1.2') && !isSemver('v1.2.3') && !isSemver('01.2.3')", device(), True),
    # optional chaining and has()
    ('device.attributes["dra.example.com"].?model.orValue("none") == "none"', device(), True),
    (
        'has(device.attributes["dra.example.com"].model) && '
        'device.attributes["dra.example.com"].model == "x"',
        device(),
        False,
    ),
]


@pytest.mark.parametrize(("expression", "dev", "expected"), MATCHES)
def test_kubernetes_dra_examples(cel: CelSelectors, expression: str, dev: CelDevice, expected: bool) -> None:
    cel.compile(expression)
    assert cel.matches(expression, dev) is expected


RUNTIME_ERRORS: list[tuple[str, CelDevice, str]] = [
    (
        'device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))',
        device(),
        "no such key: noSuchAttr" + HINT,
    ),
    (
        'device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))',
        device(),
        "no such key: noSuchAttr" + HINT,
    ),
    # scenario 35: a missing attribute, in the driver's domain or in an unknown one
    (
        "device.attributes['dra.example.com'].model == 'x1'",
        device({"index": a(0)}),
        "no such key: model" + HINT,
    ),
    (
        "device.attributes['dra.example.com'].model == 'x1'",
        device(capacity={"memory": "1"}),
        "no such key: model" + HINT,
    ),
    (
        "device.attributes['other.example.com'].model == 'x1'",
        device({"index": a(0)}),
        "no such key: model" + HINT,
    ),
    (
        'device.attributes["dra.example.com"].name',
        device({"name": a(1)}),
        "CEL result of type int could not be converted to bool",
    ),
    ("quantity('1.5').asInteger() == 1", device(), "cannot convert value to integer"),
    (
        "quantity('fish') == quantity('1')",
        device(),
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    ),
    ("semver('1.2') == semver('1.2.0')", device(), "No Major.Minor.Patch elements found"),
    (
        'device.attributes["dra.example.com"].v.major() == 1',
        device({"v": a("1.x", "version")}),
        "attribute dra.example.com/v: ",
    ),
]


@pytest.mark.parametrize(("expression", "dev", "message"), RUNTIME_ERRORS)
def test_runtime_errors_are_worded_as_upstream(
    cel: CelSelectors, expression: str, dev: CelDevice, message: str
) -> None:
    with pytest.raises(CelRuntimeError) as caught:
        cel.matches(expression, dev)
    assert caught.value.message.startswith(message)
    assert "\n" not in caught.value.message


COMPILE_ERRORS: list[tuple[str, str]] = [
    ("?!", "Syntax error"),
    ("device.driver ==", "Syntax error"),
    ("1", "must evaluate to bool or the unknown type, not int"),
    ("device.driver", "must evaluate to bool or the unknown type, not string"),
    # Typed as upstream types them: a capacity is a quantity, a domain's attributes a map.
    (
        "device.capacity['dra.example.com'].memory",
        "must evaluate to bool or the unknown type, not kubernetes.Quantity",
    ),
    ("device.capacity['dra.example.com']", "not map(string, kubernetes.Quantity)"),
    (
        "device.attributes['dra.example.com']",
        "must evaluate to bool or the unknown type, not map(string, dyn)",
    ),
    ("device.attributes", "not map(string, map(string, dyn))"),
    ("device.capacity['dra.example.com'].memory > quantity('1')", "found no matching overload for '_>_'"),
    ("device.noSuchField == 'x'", "undefined field 'noSuchField'"),
    ("noSuchFunction(device.driver)", "undeclared reference to 'noSuchFunction'"),
    ("quantity(1).isInteger()", "found no matching overload for 'quantity'"),
    ("device.driver == 1 ||", "Syntax error"),
]


@pytest.mark.parametrize(("expression", "fragment"), COMPILE_ERRORS)
def test_compile_errors_on_one_line(cel: CelSelectors, expression: str, fragment: str) -> None:
    with pytest.raises(SelectorCompileError) as caught:
        cel.compile(expression)
    assert fragment in caught.value.message
    assert "\n" not in caught.value.message
    assert "INVALID_ARGUMENT" not in caught.value.message
    # the same error comes back from evaluation, for the allocator to word as a compile error
    with pytest.raises(SelectorCompileError):
        cel.matches(expression, device())


def test_results_are_cached_and_bounded() -> None:
    small = CelSelectors(expressions=4, results=8)
    expression = "device.capacity['dra.example.com'].memory.compareTo(quantity('4Gi')) >= 0"
    devices = [device(capacity={"memory": f"{i}Gi"}) for i in range(20)]
    assert [small.matches(expression, d) for d in devices] == [i >= 4 for i in range(20)]
    assert small.cached_results == 8
    # equal content is one cache entry, whatever object carries it
    small.matches(expression, device(capacity={"memory": "19Gi"}))
    assert small.cached_results == 8


def test_a_bare_name_belongs_to_the_drivers_domain() -> None:
    dev = CelDevice.of(
        DRA,
        SliceDevice(
            "d",
            {"model": a("x"), "other.example.com/model": a("y")},
            {"memory": DeviceCapacity(Quantity.parse("1Gi"))},
        ),
    )
    assert dev.attributes == (
        ("dra.example.com", "model", "string", "x"),
        ("other.example.com", "model", "string", "y"),
    )
    assert dev.capacity == (("dra.example.com", "memory", "1Gi"),)


@pytest.mark.parametrize(
    ("text", "value"),
    [("4Gi", 4 * 2**30), ("1500m", 1.5), ("1e3", 1000), ("2k", 2000), ("-1", -1), (".5", 0.5)],
)
def test_quantity_values(text: str, value: float) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "text", ["", "1.2", "1.2.3.4", "01.0.0", "1.0.0-", "1.0.0-01", "a.b.c", "1.0.0+bad!"]
)
def test_semver_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_semver(text)


def test_semver_normalizes_on_request() -> None:
    assert str(parse_semver("v1", normalize=True)) == "1.0.0"
    assert str(parse_semver("v1.02-rc.1", normalize=True)) == "1.2.0-rc.1"


def test_it_is_the_documents_selector_compiler() -> None:
    compiler: SelectorCompiler = CelSelectors()  # the Protocol the documents' reader takes
    compiler.compile("device.driver == 'gpu.example.com'")
    with pytest.raises(SelectorCompileError) as caught:
        compiler.compile("device.driver ==")
    assert caught.value.message.startswith("ERROR: <input>:1:17: Syntax error: mismatched input '<EOF>'")
