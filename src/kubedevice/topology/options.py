"""Topology manager policy options, parsed with Go's ParseBool/Atoi rules and the kubelet's error texts."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

PREFER_CLOSEST_NUMA_NODES = "prefer-closest-numa-nodes"
MAX_ALLOWABLE_NUMA_NODES = "max-allowable-numa-nodes"
DEFAULT_MAX_ALLOWABLE_NUMA_NODES = 8
#: Options that need the TopologyManagerPolicyBetaOptions gate (on by default since 1.28).
BETA_OPTIONS = frozenset({MAX_ALLOWABLE_NUMA_NODES})
STABLE_OPTIONS = frozenset({PREFER_CLOSEST_NUMA_NODES})

_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_GO_INT = re.compile(r"[+-]?[0-9]+")
_INT64 = 1 << 63

log = logging.getLogger(__name__)


class PolicyOptionsError(ValueError):
    """An option the kubelet would refuse; the text is the kubelet's."""


def go_quote(s: str) -> str:
    """Go's %q for the printable strings option names and values are."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_bool(value: str) -> bool:
    """Go's strconv.ParseBool."""
    if value in _GO_TRUE:
        return True
    if value in _GO_FALSE:
        return False
    raise ValueError(f"strconv.ParseBool: parsing {go_quote(value)}: invalid syntax")


def atoi(value: str) -> int:
    """Go's strconv.Atoi on a 64-bit platform: optional sign, decimal digits, nothing else."""
    if not _GO_INT.fullmatch(value):
        raise ValueError(f"strconv.Atoi: parsing {go_quote(value)}: invalid syntax")
    number = int(value)
    if not -_INT64 <= number < _INT64:
        raise ValueError(f"strconv.Atoi: parsing {go_quote(value)}: value out of range")
    return number


@dataclass(frozen=True, slots=True)
class PolicyOptions:
    prefer_closest_numa: bool = False
    max_allowable_numa_nodes: int = DEFAULT_MAX_ALLOWABLE_NUMA_NODES


def parse_policy_options(options: Mapping[str, str], beta_options_enabled: bool = True) -> PolicyOptions:
    """NewPolicyOptions: unknown keys, gated keys and bad values fail with the kubelet's texts."""
    prefer_closest = False
    max_nodes = DEFAULT_MAX_ALLOWABLE_NUMA_NODES
    for name, value in options.items():
        if name in BETA_OPTIONS and not beta_options_enabled:
            raise PolicyOptionsError(
                "Topology Manager Policy Beta-level Options not enabled, "
                f"but option {go_quote(name)} provided"
            )
        if name not in BETA_OPTIONS and name not in STABLE_OPTIONS:
            raise PolicyOptionsError(f"unknown Topology Manager Policy option: {go_quote(name)}")
        if name == PREFER_CLOSEST_NUMA_NODES:
            try:
                prefer_closest = parse_bool(value)
            except ValueError as e:
                raise PolicyOptionsError(f"bad value for option {go_quote(name)}: {e}") from None
        else:
            try:
                max_nodes = atoi(value)
            except ValueError as e:
                raise PolicyOptionsError(
                    f"unable to convert policy option to integer {go_quote(name)}: {e}"
                ) from None
            if max_nodes < DEFAULT_MAX_ALLOWABLE_NUMA_NODES:
                raise PolicyOptionsError(
                    f"the minimum value of {go_quote(name)} should not be less than "
                    f"{DEFAULT_MAX_ALLOWABLE_NUMA_NODES}"
                )
            if max_nodes > DEFAULT_MAX_ALLOWABLE_NUMA_NODES:
                log.warning("topology manager: %s is %d; more NUMA nodes slow admission", name, max_nodes)
    return PolicyOptions(prefer_closest, max_nodes)


def parse_option_pairs(text: str) -> dict[str, str]:
    """`k=v,k=v` as the kubelet's map flag reads it; an item without `=` is a ValueError naming it."""
    pairs: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{item!r} is not key=value")
        pairs[key.strip()] = value.strip()
    return pairs
