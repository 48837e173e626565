"""The Kubernetes quantity and semver CEL libraries' values and functions, in plain Python.

The CEL runtime passes only its own value kinds and protocol-buffer messages across to Python, so a
quantity is a `kubernetes.Quantity` message and a semver a `kubernetes.Semver` message (the names
upstream gives the two types), each holding its canonical text: equal values have equal text, so CEL's
`==` on them means "the same amount" / "the same version", as upstream's. The check-time type of the
`device` variable, `kubernetes.DRADevice`, is declared here too. This module never imports the CEL library.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, struct_pb2

from kubedevice.resource.quantity import parse_quantity
from kubedevice.scheduler.semver import Semver, parse_semver

QUANTITY_TYPE = "kubernetes.Quantity"
SEMVER_TYPE = "kubernetes.Semver"
DEVICE_TYPE = "kubernetes.DRADevice"
_INT64 = (-(2**63), 2**63 - 1)


def _build_pool() -> descriptor_pool.DescriptorPool:
    field = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="kubedevice/dra_cel.proto", package="kubernetes", syntax="proto3"
    )
    file.dependency.append("google/protobuf/struct.proto")
    for name in ("Quantity", "Semver"):
        file.message_type.add(name=name).field.add(
            name="value", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL
        )
    device = file.message_type.add(name="DRADevice")
    device.field.add(name="driver", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    # Check-time only: Struct reads as map(string, dyn), so `device.attributes["<domain>"].<name>` type-checks
    # while `device.<unknown>` does not; evaluation passes plain maps instead.
    for number, name in ((2, "attributes"), (3, "capacity")):
        device.field.add(
            name=name,
            number=number,
            type=field.TYPE_MESSAGE,
            type_name=".google.protobuf.Struct",
            label=field.LABEL_OPTIONAL,
        )
    device.field.add(
        name="allowMultipleAllocations", number=4, type=field.TYPE_BOOL, label=field.LABEL_OPTIONAL
    )
    pool = descriptor_pool.DescriptorPool()
    struct_file = descriptor_pb2.FileDescriptorProto()
    struct_pb2.DESCRIPTOR.CopyToProto(struct_file)
    pool.Add(struct_file)
    pool.Add(file)
    return pool


class CelValues:
    """The message classes and the library functions; one per CEL environment (no module state)."""

    def __init__(self) -> None:
        self.pool = _build_pool()
        self.quantity_class: Any = message_factory.GetMessageClass(
            self.pool.FindMessageTypeByName(QUANTITY_TYPE)
        )
        self.semver_class: Any = message_factory.GetMessageClass(self.pool.FindMessageTypeByName(SEMVER_TYPE))

    # --- values -----------------------------------------------------------------------------------

    def quantity(self, text: str) -> Any:
        return self._quantity_of(parse_quantity(text))

    def semver(self, text: str, normalize: bool = False) -> Any:
        return self.semver_class(value=str(parse_semver(text, normalize)))

    def semvers(self, value: Any) -> Any:
        """A `version` attribute's semver, or a `versions` attribute's list of them."""
        if isinstance(value, tuple):
            return [self.semver(str(v)) for v in value]
        return self.semver(str(value))

    def _quantity_of(self, number: Decimal) -> Any:
        text = "0" if number == 0 else format(number.normalize(), "f")
        return self.quantity_class(value=text)

    def _number(self, value: Any) -> Decimal:
        if isinstance(value, self.quantity_class):
            return Decimal(value.value)
        if isinstance(value, int) and not isinstance(value, bool):
            return Decimal(value)
        raise TypeError("no such overload")

    def _version(self, value: Any) -> Semver:
        if isinstance(value, self.semver_class):
            return parse_semver(value.value)
        raise TypeError("no such overload")

    # --- the functions, by CEL name; members take the receiver first --------------------------------

    def functions(self) -> dict[str, Callable[..., Any]]:
        """CEL function name -> implementation; members shared by both types dispatch on the receiver."""
        return {
            "quantity": lambda s: self.quantity(s),
            "includes": includes,
            "isQuantity": _accepts(parse_quantity),
            "semver": lambda s, normalize=False: self.semver(s, normalize),
            "isSemver": _accepts(parse_semver),
            "sign": lambda q: _sign(self._number(q)),
            "isInteger": lambda q: _as_int64(self._number(q)) is not None,
            "asInteger": self._as_integer,
            "asApproximateFloat": lambda q: float(self._number(q)),
            "add": lambda q, other: self._quantity_of(self._number(q) + self._number(other)),
            "sub": lambda q, other: self._quantity_of(self._number(q) - self._number(other)),
            "major": lambda v: self._version(v).major,
            "minor": lambda v: self._version(v).minor,
            "patch": lambda v: self._version(v).patch,
            "compareTo": self._compare,
            "isGreaterThan": lambda a, b: self._compare(a, b) > 0,
            "isLessThan": lambda a, b: self._compare(a, b) < 0,
        }

    def _as_integer(self, q: Any) -> int:
        value = _as_int64(self._number(q))
        if value is None:
            raise ValueError("cannot convert value to integer")
        return value

    def _compare(self, a: Any, b: Any) -> int:
        if isinstance(a, self.semver_class) and isinstance(b, self.semver_class):
            return self._version(a).compare(self._version(b))
        if isinstance(a, self.quantity_class) and isinstance(b, self.quantity_class):
            return _sign(self._number(a) - self._number(b))
        raise TypeError("no such overload")


#: Upstream's `includes` walks at most this many elements (ResourceSliceMaxAttributeValuesPerDevice).
INCLUDES_MAX_VALUES = 48


def includes(target: Any, value: Any) -> bool:
    """`<target>.includes(<value>)` as upstream's `includesFunc` (cel/compile.go): whether a list has an
    element equal to `value` (walking at most 48 elements, an error past them), or a single value is
    equal to it."""
    if isinstance(target, list):
        for i, item in enumerate(target):
            if i >= INCLUDES_MAX_VALUES:
                raise ValueError(
                    f"'includes' function cannot be applied to lists longer than {INCLUDES_MAX_VALUES} values"
                )
            if _equal(item, value):
                return True
        return False
    return _equal(target, value)


def _equal(a: Any, b: Any) -> bool:
    """CEL's `==` on the values an attribute holds: a bool equals only a bool, numbers compare by value
    whatever their type, anything else by type and value (messages: their canonical text)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and bool(a == b)


def _accepts(parse: Callable[..., object]) -> Callable[..., bool]:
    def check(text: str, *args: Any) -> bool:
        try:
            parse(text, *args)
        except ValueError:
            return False
        return True

    return check


def _sign(number: Decimal) -> int:
    return (number > 0) - (number < 0)


def _as_int64(number: Decimal) -> int | None:
    if number != number.to_integral_value():
        return None
    value = int(number)
    return value if _INT64[0] <= value <= _INT64[1] else None
