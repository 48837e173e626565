"""Kubernetes resource quantities (`2`, `2000m`, `1k`, `1Ki`, `1e3`): device counts and DRA capacities."""

from __future__ import annotations

import re
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, ROUND_CEILING, Context, Decimal, InvalidOperation

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


#: The largest whole amount a quantity in nano-units is allowed here (int64, as `Quantity.Value()`).
MAX_QUANTITY_UNITS = 2**63 - 1


class QuantityTooLargeError(ValueError):
    """A quantity beyond 2^63-1 units."""


def quantity_nanos(value: object) -> int:
    """A quantity (its text, or an integer as YAML gives it) as an exact integer number of nano-units, as
    apimachinery's ParseQuantity keeps it: a value finer than a nano-unit rounded up (away from zero), a
    binary-suffixed value (`Ki` ... `Ei`) capped at 2^63-1. Sums and comparisons are then plain integer
    arithmetic, exact at any size. ValueError when it is not a quantity, or is beyond 2^63-1 units (which
    apimachinery holds as an arbitrary-precision decimal: nothing a device counts comes near)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(QUANTITY_FORMAT_ERROR)
    text = str(value)
    number = parse_quantity(text)
    magnitude = number.copy_abs()
    if text.endswith(_BINARY) and magnitude > MAX_QUANTITY_UNITS:
        magnitude = Decimal(MAX_QUANTITY_UNITS)
    if magnitude > MAX_QUANTITY_UNITS:
        raise QuantityTooLargeError(f"{text} is too large (at most {MAX_QUANTITY_UNITS})")
    scaled = magnitude.scaleb(9, _EXACT)
    nanos = int(scaled.to_integral_value(rounding=ROUND_CEILING, context=_EXACT))
    return -nanos if number < 0 else nanos


_BINARY = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
# As many digits as an operation needs: multiplying by a suffix and shifting by 10^9 never round.
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)
