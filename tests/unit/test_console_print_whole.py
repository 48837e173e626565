"""console.print_whole: a table printed where the output is not a terminal never breaks a word over two
lines; a table that fits, or that rich narrows without breaking a word, prints as rich prints it."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from kubedevice.console import _narrowed, print_whole

UID = "c1c1c1c1-0000-4000-8000-000000000001"
CDI = f"k8s.gpu.example.com/claim={UID}-gpu-0"


def _table(*rows: tuple[str, str, str]) -> Table:
    table = Table(title="t")
    table.add_column("name", no_wrap=True)
    for column in ("uid", "text"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def _printed(width: int, whole: bool, *rows: tuple[str, str, str]) -> list[str]:
    console = Console(file=io.StringIO(), width=width)  # not a terminal
    print_whole(console, _table(*rows)) if whole else console.print(_table(*rows))
    assert isinstance(console.file, io.StringIO)
    assert console.width == width  # given back
    return console.file.getvalue().splitlines()


def test_no_id_is_broken_and_the_table_is_as_wide_as_its_ids_need() -> None:
    row = ("default/c1", UID, f"{CDI} prepared by the driver for pod default/p0 in this run")
    folded = _printed(60, False, row)
    assert not any(UID in line for line in folded)  # rich alone folds them
    lines = _printed(60, True, row)
    assert any(UID in line for line in lines) and any(CDI in line for line in lines)
    # As narrow as the longest words allow: the text column is exactly as wide as the CDI ID.
    assert max(map(len, lines)) == len("│ default/c1 │  │  │") + len(UID) + len(CDI)


def test_a_table_that_fits_or_wraps_at_spaces_prints_as_rich_prints_it() -> None:
    fits = ("default/c1", UID, "short")
    assert _printed(120, True, fits) == _printed(120, False, fits)
    long_text = ("default/c1", UID, " ".join(["words that wrap at spaces"] * 8))
    assert _printed(100, True, long_text) == _printed(100, False, long_text)


def test_narrowing_takes_from_the_widest_columns_first_and_none_below_its_narrowest() -> None:
    assert _narrowed([(5, 50), (3, 40), (10, 10)], 200) == [50, 40, 10]
    assert _narrowed([(5, 50), (3, 40), (10, 10)], 80) == [35, 35, 10]
    assert _narrowed([(45, 50), (3, 40), (10, 10)], 60) == [45, 5, 10]
    assert _narrowed([(45, 50), (38, 40), (10, 10)], 60) == [45, 38, 10]  # more than the room: the narrowest
    assert _narrowed([(5, 50), (5, 50)], 97) == [48, 49]  # rich's rounding: the first gives more
