import pytest

from kubedevice.durations import format_duration, parse_duration
from kubedevice.resource.quantity import parse_device_count


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("500ms", 0.5),
        ("3s", 3.0),
        ("5m", 300.0),
        ("1m30s", 90.0),
        ("1h", 3600.0),
        ("1.5s", 1.5),
        ("250us", 0.00025),
        ("+2s", 2.0),
    ],
)
def test_parses_kubelet_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty"),
        ("5", "invalid duration '5'"),
        ("-3s", "negative"),
        ("3 s", "invalid"),
        ("1x", "invalid"),
        ("s", "invalid"),
    ],
)
def test_rejects_bad_durations_naming_them(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_duration(text)


def test_formats_durations() -> None:
    assert [format_duration(s) for s in (0.25, 3, 90, 300, 3700)] == ["250ms", "3s", "1m30s", "5m", "1h1m40s"]


@pytest.mark.parametrize(
    ("value", "count"), [(2, 2), ("2", 2), ("2000m", 2), ("1k", 1000), ("1Ki", 1024), ("1e2", 100), (0, 0)]
)
def test_device_counts(value: object, count: int) -> None:
    assert parse_device_count(value) == count


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("1.5", "whole number"),
        ("500m", "whole number"),
        ("two", "not a quantity"),
        (True, "not a quantity"),
        ("-1", "negative"),
        (None, "not a quantity"),
        ([1], "not a quantity"),
    ],
)
def test_bad_device_counts(value: object, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_device_count(value)
