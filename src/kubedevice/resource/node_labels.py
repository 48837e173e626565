"""A node's labels, as the kubelet has them: `kubernetes.io/hostname` set to the node's name, and those
given with `--node-labels` (`key=value,...`, a given hostname label winning). Node selectors (a slice's
`nodeSelector`) are matched against them."""

from __future__ import annotations

from collections.abc import Mapping

from kubedevice.resource.names import is_label_value, is_qualified_name

__all__ = ["HOSTNAME_LABEL", "node_labels", "parse_node_labels"]

#: The label every node carries with its name (the kubelet sets it; node selectors often use it).
HOSTNAME_LABEL = "kubernetes.io/hostname"


def parse_node_labels(text: str) -> dict[str, str]:
    """`key=value,key=value` (the kubelet's `--node-labels`); ValueError naming the pair at fault."""
    labels: dict[str, str] = {}
    for pair in (p.strip() for p in text.split(",")):
        if not pair:
            continue
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"{pair!r} is not KEY=VALUE")
        if not is_qualified_name(key):
            raise ValueError(f"{key!r} is not a label key (a qualified name, e.g. example.com/zone)")
        if not is_label_value(value):
            raise ValueError(
                f"{value!r} is not a label value (at most 63 letters, digits, '-', '_' and '.', "
                "beginning and ending with a letter or digit)"
            )
        if key in labels:
            raise ValueError(f"{key} is given twice")
        labels[key] = value
    return labels


def node_labels(node_name: str, given: Mapping[str, str] | None = None) -> dict[str, str]:
    """The node's labels: `kubernetes.io/hostname=<node_name>` unless `given` sets it, and `given`."""
    return {HOSTNAME_LABEL: node_name, **(given or {})}
