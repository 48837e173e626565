"""Kubernetes resource quantities (`2`, `2000m`, `1k`, `1Ki`, `1e3`): device counts and DRA capacities.

`Quantity` is apimachinery's `resource.Quantity` as a value: exact (never a float), ordered and added by
value, and shown as `Quantity.String()` shows it (the canonical form, or the text as parsed where apimachinery
keeps it). `parse_quantity` and `parse_device_count` are the plain readings the CEL library and the device
manager use.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from decimal import MAX_EMAX, MIN_EMIN, ROUND_UP, Context, Decimal, InvalidOperation
from typing import Literal

_SUFFIXES = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
# ASCII digits only and no surrounding space, as apimachinery's parseQuantityString reads them (Python's
# `\d` would take any script's digits, `$` a trailing newline).
_QUANTITY = re.compile(
    r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)"
)
#: apimachinery reads a decimal exponent with strconv.ParseInt(.., 32): a larger one is not a quantity.
_EXPONENT_LIMIT = 2**31
#: A device count is an int64 in the API (the device manager reads Quantity.Value()).
MAX_DEVICE_COUNT = 2**63 - 1
# Any int32 exponent is exact (upstream's inf.Dec has no exponent limit either); the default context would
# overflow past 1e999999.
_WIDE = Context(Emax=MAX_EMAX, Emin=MIN_EMIN)


#: The API machinery's wording for a quantity it cannot read.
QUANTITY_FORMAT_ERROR = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)


def parse_quantity(text: str) -> Decimal:
    """The exact value of a quantity's text; ValueError (the API machinery's wording) when it is not one."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(QUANTITY_FORMAT_ERROR)
    try:
        number = Decimal(match.group(1))
        if match.group(2):
            exponent = int(match.group(2)[1:])
            if not -_EXPONENT_LIMIT <= exponent < _EXPONENT_LIMIT:
                raise ValueError(QUANTITY_FORMAT_ERROR)
            return number.scaleb(exponent, _WIDE)
        return number.fma(_SUFFIXES[match.group(3) or ""], 0, _EXACT)
    except InvalidOperation as err:
        raise ValueError(QUANTITY_FORMAT_ERROR) from err


def parse_device_count(value: object) -> int:
    """The whole number of devices a quantity asks for; ValueError says why it is not one."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        number = Decimal(value)
    elif isinstance(value, float):
        number = Decimal(repr(value))
        if not number.is_finite():
            raise ValueError(f"{value!r} is not a quantity")
    elif isinstance(value, str):
        try:
            number = parse_quantity(value)
        except ValueError as err:
            raise ValueError(f"{value!r} is not a quantity") from err
    else:
        raise ValueError(f"{value!r} is not a quantity")
    if not number.is_finite():
        raise ValueError(f"{value!r} is not a quantity")
    if number < 0:
        raise ValueError(f"{value!r} is negative")
    # Compared before int(): `1e999999` as an int would be a million digits long.
    if number > MAX_DEVICE_COUNT:
        raise ValueError(f"{value!r} is more than {MAX_DEVICE_COUNT} devices (a count is an int64)")
    if number != number.to_integral_value():
        raise ValueError(f"{value!r} is not a whole number of devices")
    return int(number)


#: How a quantity is written back (apimachinery's `Format`): `12e6`, `12Mi`, `12M`.
QuantityFormat = Literal["DecimalExponent", "BinarySI", "DecimalSI"]
_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_INT64_MAX = 2**63 - 1
_NANO = Decimal("1e-9")
# Exact for every value whose digits span fewer than 1000 places (all of them: values keep 9 places after
# the point); a sum of absurd magnitudes (1e5000 + 1) rounds instead of building a 5000-digit number.
_EXACT = Context(prec=1000, Emax=MAX_EMAX, Emin=MIN_EMIN)


@functools.total_ordering
@dataclass(frozen=True, slots=True, eq=False)
class Quantity:
    """A `resource.Quantity`: `value` exact, `format` the kind of suffix it was written with.

    Compared, hashed and added by value (`1Ki == 1024`). `str()` is `Quantity.String()`: the canonical form
    (`1.5Gi` -> `1536Mi`, `1.5` -> `1500m`), or the text as parsed when apimachinery keeps that (`text`).
    """

    value: Decimal
    format: QuantityFormat = "DecimalSI"
    #: The text as parsed, where apimachinery shows it as written (`+1`, `1.500`); None otherwise.
    text: str | None = None

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """The quantity `text` writes; ValueError (the API machinery's wording) when it is not one.

        As `resource.ParseQuantity`: rounded up to nanos, a binary quantity under 1 written decimal, one
        above 2^63-1 capped there."""
        match = _QUANTITY.fullmatch(text)
        if match is None:
            raise ValueError(QUANTITY_FORMAT_ERROR)
        if text == "0":
            return cls(Decimal(0), "DecimalSI", text)
        number, exponent_text, suffix = match.groups()
        fmt: QuantityFormat
        if exponent_text:
            fmt, exponent = "DecimalExponent", int(exponent_text[1:])
            if not -_EXPONENT_LIMIT <= exponent < _EXPONENT_LIMIT:
                raise ValueError(QUANTITY_FORMAT_ERROR)
        elif suffix and suffix.endswith("i"):
            fmt, exponent = "BinarySI", 10 * _BINARY.index(suffix)
        else:
            fmt, exponent = "DecimalSI", _DECIMAL_EXPONENTS[suffix or ""]
        try:
            value = Decimal(number)
            if fmt == "BinarySI":
                value = _EXACT.multiply(value, 2**exponent)
            else:
                value = value.scaleb(exponent, _EXACT)
            places = value.as_tuple().exponent
            if isinstance(places, int) and places < -9:
                value = value.quantize(_NANO, ROUND_UP, _EXACT)
        except InvalidOperation as err:
            raise ValueError(QUANTITY_FORMAT_ERROR) from err
        if fmt == "BinarySI":
            if abs(value) > _INT64_MAX:
                value = Decimal(_INT64_MAX).copy_sign(value)
            if 0 < abs(value) < 1:
                fmt = "DecimalSI"
        return cls(value, fmt, text if _kept_as_written(number, exponent, fmt) else None)

    @classmethod
    def read(cls, value: object) -> Quantity:
        """A quantity as a decoded document holds it: a string, or a YAML integer; ValueError otherwise."""
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ValueError(f"{value!r} is not a quantity (e.g. 16Gi, 2, 500m)")
        try:
            return cls.parse(str(value))
        except ValueError:
            raise ValueError(f"{value!r} is not a quantity (e.g. 16Gi, 2, 500m)") from None

    @classmethod
    def of(cls, value: int | Decimal, fmt: QuantityFormat = "DecimalSI") -> Quantity:
        """`resource.NewQuantity(value, fmt)`."""
        return cls(Decimal(value), fmt)

    # --- arithmetic and order, by value (apimachinery's Add, Sub, Cmp) ---------------------------------

    def __add__(self, other: Quantity) -> Quantity:
        # A zero takes the other's format, as Quantity.Add does.
        return Quantity(_EXACT.add(self.value, other.value), other.format if not self.value else self.format)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(
            _EXACT.subtract(self.value, other.value), other.format if not self.value else self.format
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __lt__(self, other: Quantity) -> bool:
        return self.value < other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __bool__(self) -> bool:
        return bool(self.value)

    def ceil(self) -> int:
        """`Quantity.Value()`: rounded up away from zero, held in an int64 (saturated beyond it)."""
        if self.value > _INT64_MAX:
            return _INT64_MAX
        if self.value < -_INT64_MAX - 1:
            return -_INT64_MAX - 1
        whole = int(self.value.to_integral_value(ROUND_UP))
        return max(-_INT64_MAX - 1, min(_INT64_MAX, whole))

    def __str__(self) -> str:
        if self.text is not None:
            return self.text
        return canonical_quantity(self.value, self.format)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"


def canonical_quantity(value: Decimal, fmt: QuantityFormat) -> str:
    """`Quantity.CanonicalizeBytes`: no fraction digits, the largest suffix that loses nothing; binary only
    for whole numbers of at least 1024 (`1Ki`, `1536Mi`), decimal exponents in threes (`1500m`, `12e6`)."""
    if not value:
        return "0"
    sign, magnitude = ("-" if value < 0 else ""), abs(value)
    if fmt == "BinarySI" and magnitude >= 1024 and magnitude == magnitude.to_integral_value():
        mantissa, power = int(magnitude), 0
        while mantissa % 1024 == 0 and power < len(_BINARY) - 1:
            mantissa //= 1024
            power += 1
        return f"{sign}{mantissa}{_BINARY[power]}"
    digits, exponent = _canonical_digits(magnitude)
    if fmt == "DecimalSI" and exponent in _DECIMAL:
        return f"{sign}{digits}{_DECIMAL[exponent]}"
    # DecimalExponent, or a decimal value past `E` (apimachinery would drop the suffix and change the value).
    return f"{sign}{digits}" + (f"e{exponent}" if exponent else "")


def _canonical_digits(magnitude: Decimal) -> tuple[str, int]:
    """(mantissa, exponent) with the exponent a multiple of 3, as large as an integral mantissa allows."""
    _, coefficient, exponent = magnitude.normalize(_EXACT).as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, coefficient))
    pad = exponent % 3
    return digits + "0" * pad, exponent - pad


_DECIMAL_EXPONENTS = {suffix: exponent for exponent, suffix in _DECIMAL.items()}


def _kept_as_written(number: str, exponent: int, fmt: QuantityFormat) -> bool:
    """Whether `ParseQuantity` keeps the text as its String() (its int64 fast path on a canonical-looking
    text): then `+1`, `010` and `1.500` are shown as written."""
    whole, _, fraction = number.lstrip("+-").partition(".")
    num = whole.lstrip("0") or "0"
    shifted = num + fraction
    if fmt == "BinarySI":
        if fraction or 15 - len(num) - exponent * 3 // 10 - 1 < 0:
            return False
        return int(shifted) << exponent <= _INT64_MAX and int(shifted) & 7 != 0
    if 18 - len(shifted) < 0:
        return False
    scale = exponent - len(fraction)
    return scale >= -9 and scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"


#: The largest whole amount a quantity in nano-units is allowed here (int64, as `Quantity.Value()`).
MAX_QUANTITY_UNITS = _INT64_MAX


class QuantityTooLargeError(ValueError):
    """A quantity beyond 2^63-1 units."""


def quantity_nanos(value: object) -> int:
    """A quantity (its text, or an integer as YAML gives it) as an exact integer number of nano-units, as
    `Quantity.parse` keeps it (finer than a nano rounded up, a binary-suffixed value capped at 2^63-1): sums
    and comparisons of counters are then plain integer arithmetic. ValueError when it is not a quantity, or
    is beyond 2^63-1 units (apimachinery holds that as an arbitrary-precision decimal: nothing a device
    counts comes near)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(QUANTITY_FORMAT_ERROR)
    text = str(value)
    number = Quantity.parse(text).value
    if abs(number) > MAX_QUANTITY_UNITS:
        raise QuantityTooLargeError(f"{text} is too large (at most {MAX_QUANTITY_UNITS})")
    return int(number.scaleb(9, _EXACT))
