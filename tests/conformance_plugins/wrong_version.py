"""Broken: sends an API version the kubelet does not support."""

from _baseline import Plugin, main


class WrongVersion(Plugin):
    version = "v1alpha"


if __name__ == "__main__":
    main(WrongVersion)
