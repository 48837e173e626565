"""Semantic versions as the Kubernetes CEL semver library reads them (github.com/blang/semver/v4).

`version` attributes of devices and `semver("1.2.3")` in selectors are such values. Build metadata is
parsed and dropped: it never takes part in a comparison, so two versions that differ only there are equal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUMERIC = re.compile(r"^(0|[1-9][0-9]*)$")
_IDENTIFIER = re.compile(r"^[0-9A-Za-z-]+$")


@dataclass(frozen=True, slots=True)
class Semver:
    major: int
    minor: int
    patch: int
    #: Pre-release identifiers, numbers as int, others as str.
    pre: tuple[int | str, ...] = ()

    def __str__(self) -> str:
        core = f"{self.major}.{self.minor}.{self.patch}"
        return core + ("-" + ".".join(str(p) for p in self.pre) if self.pre else "")

    def compare(self, other: Semver) -> int:
        """-1, 0 or 1, by semver precedence (a pre-release sorts before its release)."""
        mine = (self.major, self.minor, self.patch)
        theirs = (other.major, other.minor, other.patch)
        if mine != theirs:
            return -1 if mine < theirs else 1
        if not self.pre or not other.pre:
            return (not self.pre) - (not other.pre)
        for a, b in zip(self.pre, other.pre, strict=False):
            if a == b:
                continue
            if isinstance(a, int) and isinstance(b, int):
                return -1 if a < b else 1
            if isinstance(a, int):  # numeric identifiers sort before alphanumeric ones
                return -1
            if isinstance(b, int):
                return 1
            return -1 if a < b else 1
        return (len(self.pre) > len(other.pre)) - (len(self.pre) < len(other.pre))


def parse_semver(text: str, normalize: bool = False) -> Semver:
    """A strict `MAJOR.MINOR.PATCH[-pre][+build]`; ValueError with blang/semver's wording otherwise.

    With `normalize`, as the library's `semver(text, true)`: a leading `v` is dropped, a missing minor or
    patch reads as 0 and leading zeros are removed.
    """
    if normalize:
        text = _normalize(text)
    if not text:
        raise ValueError("Version string empty")
    main, _, _build = text.partition("+")
    if _build and not all(_IDENTIFIER.match(b) for b in _build.split(".")):
        raise ValueError(f"Invalid character(s) found in build meta data {_build!r}")
    core, dash, prerelease = main.partition("-")
    parts = core.split(".")
    if len(parts) != 3:
        raise ValueError("No Major.Minor.Patch elements found")
    numbers: list[int] = []
    for label, part in zip(("major", "minor", "patch"), parts, strict=True):
        if not part.isdigit() or not part.isascii():
            raise ValueError(f"Invalid character(s) found in {label} number {part!r}")
        if len(part) > 1 and part.startswith("0"):
            raise ValueError(f"{label.capitalize()} number must not contain leading zeroes {part!r}")
        numbers.append(int(part))
    pre: list[int | str] = []
    if dash:
        for identifier in prerelease.split("."):
            if not identifier or not _IDENTIFIER.match(identifier):
                raise ValueError(f"Invalid character(s) found in prerelease {identifier!r}")
            if identifier.isdigit():
                if not _NUMERIC.match(identifier):
                    raise ValueError(
                        f"Numeric PreRelease version must not contain leading zeroes {identifier!r}"
                    )
                pre.append(int(identifier))
            else:
                pre.append(identifier)
    return Semver(numbers[0], numbers[1], numbers[2], tuple(pre))


def _normalize(text: str) -> str:
    text = text.removeprefix("v")
    cut = len(text)
    for mark in ("-", "+"):
        at = text.find(mark)
        if at != -1:
            cut = min(cut, at)
    core, rest = text[:cut], text[cut:]
    parts = core.split(".")
    while len(parts) < 3:
        parts.append("0")
    parts = [p.lstrip("0") or "0" if p.isdigit() else p for p in parts]
    return ".".join(parts) + rest
