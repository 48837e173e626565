"""resource/quantity.py's Quantity: apimachinery's resource.Quantity as a value (parse, order, arithmetic,
String())."""

from __future__ import annotations

from decimal import Decimal

import pytest

from kubedevice.resource.quantity import QUANTITY_FORMAT_ERROR, Quantity

# (text, String() as apimachinery shows the parsed quantity, exact value)
SHOWN = [
    ("0", "0", "0"),
    ("1", "1", "1"),
    ("10Gi", "10Gi", "10737418240"),
    ("1024Mi", "1Gi", "1073741824"),  # canonical: the largest suffix that loses nothing
    ("1.5Gi", "1536Mi", "1610612736"),
    ("1.5", "1500m", "1.5"),
    ("1000", "1k", "1000"),
    ("1500", "1500", "1500"),
    ("0.5Ki", "512", "512"),  # binary under 1024 is shown decimal
    ("1.0Ki", "1Ki", "1024"),
    ("100m", "100m", "0.1"),
    ("1.000", "1", "1"),
    ("-2048Ki", "-2Mi", "-2097152"),
    ("1e-12", "1e-9", "1e-9"),  # rounded up to nanos
    ("8Ei", "9223372036854775807", "9223372036854775807"),  # binary is capped at 2^63-1
    ("1e3", "1e3", "1000"),
    ("12e5", "1200e3", "1200000"),
    # apimachinery keeps these texts as written (its int64 fast path sees them as canonical)
    ("+1", "+1", "1"),
    ("010", "010", "10"),
    ("1.500", "1.500", "1.5"),
    ("1E3", "1E3", "1000"),
]


@pytest.mark.parametrize(("text", "shown", "value"), SHOWN)
def test_parse_and_string(text: str, shown: str, value: str) -> None:
    q = Quantity.parse(text)
    assert str(q) == shown
    assert q.value == Decimal(value)


@pytest.mark.parametrize("text", ["", "1.5.5", "Gi", "1Qi", "1 Gi", "1Gi\n", "\uff11"])
def test_not_a_quantity(text: str) -> None:
    with pytest.raises(ValueError, match="quantities must match") as err:
        Quantity.parse(text)
    assert str(err.value) == QUANTITY_FORMAT_ERROR


def test_read_takes_yaml_integers_not_booleans_or_floats() -> None:
    assert Quantity.read(16) == Quantity.parse("16")
    for bad in (True, 1.5, None, [1]):
        with pytest.raises(ValueError, match="is not a quantity"):
            Quantity.read(bad)


def test_order_equality_and_hash_by_value() -> None:
    assert Quantity.parse("1Ki") == Quantity.parse("1024") == Quantity.parse("1.024k")
    assert len({Quantity.parse("1Ki"), Quantity.parse("1024")}) == 1
    assert sorted(Quantity.parse(t) for t in ("2", "1Ki", "500m")) == [
        Quantity.parse("500m"),
        Quantity.parse("2"),
        Quantity.parse("1Ki"),
    ]
    assert Quantity.parse("1") <= Quantity.parse("1000m") < Quantity.parse("1001m")


def test_arithmetic_is_exact_and_keeps_the_format() -> None:
    assert str(Quantity.parse("1Gi") + Quantity.parse("1Gi")) == "2Gi"
    assert str(Quantity.parse("0") + Quantity.parse("1Gi")) == "1Gi"  # a zero takes the other's format
    assert str(Quantity.parse("100m") + Quantity.parse("200m")) == "300m"
    big = Quantity.parse("123456789012345678901234567890")
    assert (big + Quantity.parse("1")).value == Decimal("123456789012345678901234567891")
    assert str(Quantity.parse("4") - Quantity.parse("1")) == "3"
    assert not Quantity.parse("1") - Quantity.parse("1000m")


def test_new_quantity_and_ceil() -> None:
    assert str(Quantity.of(4, "BinarySI")) == "4"
    assert str(Quantity.of(2048, "BinarySI")) == "2Ki"
    assert Quantity.parse("1500m").ceil() == 2
    assert Quantity.parse("-1500m").ceil() == -2  # away from zero, as Value()
    assert Quantity.parse("1e30").ceil() == 2**63 - 1  # saturated: Value() is an int64
    assert Quantity.parse("1e999999999").ceil() == 2**63 - 1  # without building the number
