"""Kubernetes resource quantities (`2`, `2000m`, `1k`, `1Ki`, `1e3`): device counts and DRA capacities."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

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
_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")


#: The API machinery's wording for a quantity it cannot read.
QUANTITY_FORMAT_ERROR = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)


def parse_quantity(text: str) -> Decimal:
    """The exact value of a quantity's text; ValueError (the API machinery's wording) when it is not one."""
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise ValueError(QUANTITY_FORMAT_ERROR)
    try:
        number = Decimal(match.group(1))
        if match.group(2):
            return number.scaleb(int(match.group(2)[1:]))
        return number * _SUFFIXES[match.group(3) or ""]
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
    elif isinstance(value, str):
        try:
            number = parse_quantity(value)
        except ValueError as err:
            raise ValueError(f"{value!r} is not a quantity") from err
    else:
        raise ValueError(f"{value!r} is not a quantity")
    if number < 0:
        raise ValueError(f"{value!r} is negative")
    if number != number.to_integral_value():
        raise ValueError(f"{value!r} is not a whole number of devices")
    return int(number)
