"""CEL device selectors in Kubernetes' DRA environment; the only module that imports the CEL library.

The library is cel-expr-python (Google's cel-cpp). Each expression is compiled twice: once type-checked
against `device: kubernetes.DRADevice` (compile errors, result type) and once unchecked for evaluation,
because the device's attribute maps hold values of several types, which the checked form cannot be fed.
Results are cached per (expression, device content) in bounded caches: the library leaks a little memory
on every call of a Python-defined function (the quantity and semver functions are such), and a device's
answer never changes while its published content does not.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

from kubedevice.resource.model import SelectorCompileError
from kubedevice.resource.slice_model import SliceDevice
from kubedevice.scheduler.cel_values import DEVICE_TYPE, QUANTITY_TYPE, SEMVER_TYPE, CelValues

__all__ = ["COST_LIMIT_EXCEEDED", "CelDevice", "CelRuntimeError", "CelSelectors", "SelectorCompileError"]

_NO_SUCH_KEY = re.compile(r'Key not found in map\s*:\s*"?(.*?)"?$')
_STATUS_PREFIX = re.compile(r"^[A-Z_]+: ")
#: cel-cpp's names of the built-in types (INT, MAP, ...), upper case; a message name never is all of it.
_BUILTIN_TYPE = re.compile(r"(?<![\w.])[A-Z_]+(?![\w.])")
#: cel-go's hint for a missing key, as newest upstream appends it.
_OPTIONAL_HINT = (
    ". consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() "
    "for optional fields"
)
#: How many unknown domains one evaluation may add before its error stands (each retry adds one).
_MAX_DOMAIN_RETRIES = 8
#: cel-go's words when an evaluation passes its runtime cost limit, as Kubernetes' selectors report it
#: (CompileCELExpression's `cel.CostLimit`, resourceapi.CELSelectorExpressionMaxCost, 1,000,000 units).
COST_LIMIT_EXCEEDED = "operation cancelled: actual cost limit exceeded"
#: cel-cpp's words for the same: the library stops an evaluation after a fixed number of comprehension
#: iterations (10,000 over all its loops; it offers no setting), which is its runtime budget.
_ITERATION_BUDGET_EXCEEDED = "Iteration budget exceeded"


class CelRuntimeError(Exception):
    """A selector that failed on a device; the message is upstream's wording of the runtime error."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class CelDevice:
    """What a selector sees of a device, hashable so that results can be cached by content."""

    driver: str
    #: (domain, name, kind, value), sorted; a bare published name is in the driver's domain; a list
    #: attribute's value is a tuple.
    attributes: tuple[tuple[str, str, str, int | bool | str | tuple[int | bool | str, ...]], ...]
    #: (domain, name, quantity text), sorted.
    capacity: tuple[tuple[str, str, str], ...]
    #: `device.allowMultipleAllocations` (false when the slice leaves it out).
    allow_multiple_allocations: bool = False
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        # Computed once: a device is looked up in the results cache once per selector and search.
        return self._hash

    def __post_init__(self) -> None:
        key = (self.driver, self.attributes, self.capacity, self.allow_multiple_allocations)
        object.__setattr__(self, "_hash", hash(key))

    @classmethod
    def of(cls, driver: str, device: SliceDevice) -> CelDevice:
        attributes = sorted(
            (*_qualified(name, driver), value.kind, value.value) for name, value in device.attributes.items()
        )
        capacity = sorted((*_qualified(name, driver), str(c.value)) for name, c in device.capacity.items())
        return cls(driver, tuple(attributes), tuple(capacity), device.allow_multiple_allocations)


def _qualified(name: str, driver: str) -> tuple[str, str]:
    domain, sep, short = name.partition("/")
    return (domain, short) if sep else (driver, name)


class _LRU:
    """A dictionary that forgets its oldest entry beyond `size` entries."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[Any, Any] = OrderedDict()

    def get(self, key: Any) -> Any:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: Any, value: Any) -> None:
        self._items[key] = value
        if len(self._items) > self._size:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


class CelSelectors:
    """Compiles and evaluates selectors; implements the documents' SelectorCompiler.

    One instance lives as long as the daemon: its caches are what makes repeated allocation cheap, and
    they are bounded (`expressions` compiled expressions, `results` device answers) so memory stays flat.
    """

    def __init__(self, expressions: int = 4096, results: int = 65536) -> None:
        self._values = CelValues()
        self._checker = cel.NewEnv(
            self._values.pool,
            variables=_checked_variables(),
            extensions=_extensions("kubernetes-checked", _checked_functions()),
        )
        self._runner = cel.NewEnv(
            self._values.pool,
            variables={"device": cel.Type.DYN},
            extensions=_extensions("kubernetes", _runtime_functions(self._values.functions())),
        )
        # One caller at a time: the daemon compiles while reading documents (in a thread) and evaluates
        # during a search; the caches and the library's objects are not shared between threads unguarded.
        self._lock = threading.RLock()
        self._compiled: _LRU = _LRU(expressions)
        self._results: _LRU = _LRU(results)
        # Keyed by identity (the entry holds the device, so the id cannot be reused while cached):
        # slices are re-read only when their files change, so the same objects come back every search.
        self._devices: _LRU = _LRU(results // 8)

    def device(self, driver: str, device: SliceDevice) -> CelDevice:
        """The device as selectors see it, kept while the same published device object is offered."""
        with self._lock:
            entry = self._devices.get(id(device))
            if entry is None or entry[0] is not device:
                entry = (device, CelDevice.of(driver, device))
                self._devices.put(id(device), entry)
        cel_device: CelDevice = entry[1]
        return cel_device

    @property
    def cached_results(self) -> int:
        return len(self._results)

    def compile(self, expression: str) -> None:
        """Returns when `expression` is a valid selector; SelectorCompileError (one line) otherwise."""
        with self._lock:
            self._program(expression)

    def matches(self, expression: str, device: CelDevice) -> bool:
        """Whether the device satisfies the selector; CelRuntimeError when evaluation fails,
        SelectorCompileError when the expression does not compile."""
        key = (expression, device)
        with self._lock:
            cached = self._results.get(key)
            if cached is None:
                cached = self._evaluate(expression, device)
                self._results.put(key, cached)
        if isinstance(cached, CelRuntimeError):
            raise cached
        return bool(cached)

    def _program(self, expression: str) -> Any:
        cached = self._compiled.get(expression)
        if cached is None:
            try:
                checked = self._checker.compile(expression)
            except RuntimeError as err:
                cached = SelectorCompileError(_one_line(str(err)))
            else:
                returns = checked.return_type()
                if returns in (cel.Type.BOOL, cel.Type.DYN):
                    cached = self._runner.compile(expression, disable_check=True)
                else:
                    cached = SelectorCompileError(
                        f"must evaluate to bool or the unknown type, not {_type_name(returns.name())}"
                    )
            self._compiled.put(expression, cached)
        if isinstance(cached, SelectorCompileError):
            raise cached
        return cached

    def _evaluate(self, expression: str, device: CelDevice) -> bool | CelRuntimeError:
        program = self._program(expression)  # a SelectorCompileError is the caller's to word
        try:
            data = self._device_data(device)
        except ValueError as err:
            return CelRuntimeError(str(err))
        for _ in range(_MAX_DOMAIN_RETRIES):
            try:
                result = program.eval(data={"device": data})
            except RuntimeError as err:
                # The library raises (rather than returning an error value) when it stops an evaluation:
                # past its budget, or on an internal failure. Either is this selector's runtime error on
                # this device, never the caller's crash.
                if _ITERATION_BUDGET_EXCEEDED in str(err):
                    return CelRuntimeError(COST_LIMIT_EXCEEDED)
                return CelRuntimeError(_one_line(str(err)))
            if result.type() != cel.Type.ERROR:
                value = result.value()
                if isinstance(value, bool):
                    return value
                # cel-go names a value's type without its parameters: `list`, not `list(dyn)`.
                name = _type_name(result.type().name()).partition("(")[0]
                return CelRuntimeError(f"CEL result of type {name} could not be converted to bool")
            message = _STATUS_PREFIX.sub("", str(result.value()))
            missing = _NO_SUCH_KEY.search(message)
            if missing is None:
                return CelRuntimeError(message)
            key = missing.group(1)
            # An unknown domain reads as an empty map (upstream's map with a default); a key missing
            # inside a known domain is the expression's error.
            if key in data["attributes"] and key in data["capacity"]:
                return CelRuntimeError(f"no such key: {key}{_OPTIONAL_HINT}")
            data["attributes"].setdefault(key, {})
            data["capacity"].setdefault(key, {})
        return CelRuntimeError(f"no such key: {key}{_OPTIONAL_HINT}")

    def _device_data(self, device: CelDevice) -> dict[str, Any]:
        attributes: dict[str, dict[str, Any]] = {}
        for domain, name, kind, value in device.attributes:
            data: Any = value
            if kind in ("version", "versions"):
                try:
                    data = self._values.semvers(value)
                except ValueError as err:
                    raise ValueError(f"attribute {domain}/{name}: parse semantic version: {err}") from err
            elif isinstance(value, tuple):
                data = list(value)  # a list attribute is a CEL list
            attributes.setdefault(domain, {})[name] = data
        capacity: dict[str, dict[str, Any]] = {}
        for domain, name, text in device.capacity:
            try:
                capacity.setdefault(domain, {})[name] = self._values.quantity(text)
            except ValueError as err:
                raise ValueError(f"capacity {domain}/{name}: {err}") from err
        return {
            "driver": device.driver,
            "allowMultipleAllocations": device.allow_multiple_allocations,
            "attributes": attributes,
            "capacity": capacity,
        }


def _checked_variables() -> dict[str, Any]:
    """What the type check knows of `device`: upstream's types, so that a selector whose result is a map
    or a quantity is refused when it is read, as the API server refuses it, not when a device is checked.

    A protobuf message cannot hold a map of maps, so the message `kubernetes.DRADevice` types its
    `attributes` and `capacity` as `map(string, dyn)`; the qualified names `device.attributes` and
    `device.capacity` are declared apart with their real types (CEL resolves the longest declared name
    first): domain -> name -> any value, and domain -> name -> quantity.
    """

    def by_name(value: Any) -> Any:
        return cel.Type.Map(cel.Type.STRING, cel.Type.Map(cel.Type.STRING, value))

    return {
        "device": cel.Type(DEVICE_TYPE),
        "device.attributes": by_name(cel.Type.DYN),
        "device.capacity": by_name(cel.Type(QUANTITY_TYPE)),
    }


def _extensions(name: str, functions: list[Any]) -> list[Any]:
    return [
        ext_bindings.ExtBindings(),
        ext_optional.ExtOptional(),
        ext_strings.ExtStrings(),
        cel.CelExtension(name, functions),
    ]


def _checked_functions() -> list[Any]:
    """The libraries' typed declarations, for type-checking only (never evaluated)."""
    q, s = cel.Type(QUANTITY_TYPE), cel.Type(SEMVER_TYPE)
    string, boolean, integer = cel.Type.STRING, cel.Type.BOOL, cel.Type.INT

    def decl(name: str, *overloads: tuple[str, Any, list[Any], bool]) -> Any:
        return cel.FunctionDecl(
            name,
            [
                cel.Overload(oid, returns, params, is_member=member)
                for oid, returns, params, member in overloads
            ],
        )

    return [
        decl("quantity", ("quantity_string", q, [string], False)),
        # DRAListTypeAttributes (alpha upstream): `<target>.includes(<value>)`, a list or a single value.
        decl("includes", ("dra_includes_dyn_dyn", boolean, [cel.Type.DYN, cel.Type.DYN], True)),
        decl("isQuantity", ("isQuantity_string", boolean, [string], False)),
        decl(
            "semver",
            ("semver_string", s, [string], False),
            ("semver_string_bool", s, [string, boolean], False),
        ),
        decl(
            "isSemver",
            ("isSemver_string", boolean, [string], False),
            ("isSemver_string_bool", boolean, [string, boolean], False),
        ),
        decl("sign", ("quantity_sign", integer, [q], True)),
        decl("isInteger", ("quantity_isInteger", boolean, [q], True)),
        decl("asInteger", ("quantity_asInteger", integer, [q], True)),
        decl("asApproximateFloat", ("quantity_asApproximateFloat", cel.Type.DOUBLE, [q], True)),
        decl("add", ("quantity_add", q, [q, q], True), ("quantity_add_int", q, [q, integer], True)),
        decl("sub", ("quantity_sub", q, [q, q], True), ("quantity_sub_int", q, [q, integer], True)),
        decl("major", ("semver_major", integer, [s], True)),
        decl("minor", ("semver_minor", integer, [s], True)),
        decl("patch", ("semver_patch", integer, [s], True)),
        decl(
            "compareTo",
            ("quantity_compareTo", integer, [q, q], True),
            ("semver_compareTo", integer, [s, s], True),
        ),
        decl(
            "isGreaterThan",
            ("quantity_isGreaterThan", boolean, [q, q], True),
            ("semver_isGreaterThan", boolean, [s, s], True),
        ),
        decl(
            "isLessThan",
            ("quantity_isLessThan", boolean, [q, q], True),
            ("semver_isLessThan", boolean, [s, s], True),
        ),
    ]


#: name -> (is_member, arities): the runtime's overloads, typed dyn (the runtime dispatches on kind only,
#: and both libraries' values are messages, so one overload per arity serves quantities and semvers).
_RUNTIME_SHAPES: Mapping[str, tuple[bool, tuple[int, ...]]] = {
    "quantity": (False, (1,)),
    "includes": (True, (2,)),
    "isQuantity": (False, (1,)),
    "semver": (False, (1, 2)),
    "isSemver": (False, (1, 2)),
    "sign": (True, (1,)),
    "isInteger": (True, (1,)),
    "asInteger": (True, (1,)),
    "asApproximateFloat": (True, (1,)),
    "add": (True, (2,)),
    "sub": (True, (2,)),
    "major": (True, (1,)),
    "minor": (True, (1,)),
    "patch": (True, (1,)),
    "compareTo": (True, (2,)),
    "isGreaterThan": (True, (2,)),
    "isLessThan": (True, (2,)),
}


def _runtime_functions(impls: Mapping[str, Callable[..., Any]]) -> list[Any]:
    dyn = cel.Type.DYN
    return [
        cel.FunctionDecl(
            name,
            [
                cel.Overload(f"{name}_dyn_{arity}", dyn, [dyn] * arity, is_member=member, impl=impls[name])
                for arity in arities
            ],
        )
        for name, (member, arities) in _RUNTIME_SHAPES.items()
    ]


def _one_line(message: str) -> str:
    """The library's compile message without its status code and source excerpt, on one line."""
    message = _STATUS_PREFIX.sub("", message.strip())
    message = re.sub(r"\s*\[[A-Z_]+\]$", "", message)
    lines = [
        line.strip() for line in message.splitlines() if line.strip() and not line.lstrip().startswith("|")
    ]
    return "; ".join(lines)


def _type_name(name: str) -> str:
    """cel-cpp's `LIST<INT>` as cel-go spells it, `list(int)`; a message's name (`kubernetes.Quantity`)
    keeps its case."""
    lowered = _BUILTIN_TYPE.sub(lambda m: m.group(0).lower(), name)
    return lowered.replace("<", "(").replace(">", ")")
