"""The NUMA bitmask: an unsigned 64-bit integer, one bit per NUMA node ID.

Ties between masks of the same width are broken by the integer value, as the kubelet's code does (its
comment speaks of "lower-numbered bits", but `{1,2}` = 6 is narrower than `{0,3}` = 9).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

MAX_BIT = 63
_ALL = (1 << (MAX_BIT + 1)) - 1


class BitMaskError(ValueError):
    """A bit outside 0..63 was given."""


def _bit(b: int) -> int:
    if not 0 <= b <= MAX_BIT:
        raise BitMaskError("bit number must be in range 0-63")
    return 1 << b


@dataclass(frozen=True, slots=True, order=False)
class BitMask:
    """An immutable NUMA mask; `Add`/`Remove` return a new mask instead of changing this one."""

    value: int = 0

    @classmethod
    def of(cls, *bits: int) -> BitMask:
        """The mask with exactly `bits` set; any bit outside 0..63 fails."""
        value = 0
        for b in bits:
            value |= _bit(b)
        return cls(value)

    @classmethod
    def filled(cls) -> BitMask:
        return cls(_ALL)

    def add(self, *bits: int) -> BitMask:
        return BitMask(self.value | BitMask.of(*bits).value)

    def remove(self, *bits: int) -> BitMask:
        return BitMask(self.value & ~BitMask.of(*bits).value)

    def and_(self, *others: BitMask) -> BitMask:
        value = self.value
        for o in others:
            value &= o.value
        return BitMask(value)

    def or_(self, *others: BitMask) -> BitMask:
        value = self.value
        for o in others:
            value |= o.value
        return BitMask(value)

    def is_empty(self) -> bool:
        return self.value == 0

    def is_set(self, b: int) -> bool:
        return 0 <= b <= MAX_BIT and bool(self.value >> b & 1)

    def any_set(self, bits: Iterable[int]) -> bool:
        return any(self.is_set(b) for b in bits)

    def count(self) -> int:
        return self.value.bit_count()

    def bits(self) -> list[int]:
        """The set bits, ascending."""
        return [b for b in range(self.value.bit_length()) if self.value >> b & 1]

    def is_less_than(self, other: BitMask) -> bool:
        return self.value < other.value

    def is_greater_than(self, other: BitMask) -> bool:
        return self.value > other.value

    def is_narrower_than(self, other: BitMask) -> bool:
        """Fewer bits wins; with as many bits, the smaller integer value wins."""
        mine, theirs = self.count(), other.count()
        if mine == theirs:
            return self.value < other.value
        return mine < theirs

    def __str__(self) -> str:
        return "{" + ",".join(map(str, self.bits())) + "}"


def narrowest(m1: BitMask, m2: BitMask) -> BitMask:
    return m1 if m1.is_narrower_than(m2) else m2


def iterate_bitmasks(nodes: Iterable[int]) -> Iterator[BitMask]:
    """Every non-empty subset of `nodes`: by size, then in lexicographic order of the given list."""
    listed = list(nodes)
    for size in range(1, len(listed) + 1):
        for combo in itertools.combinations(listed, size):
            yield BitMask.of(*combo)
