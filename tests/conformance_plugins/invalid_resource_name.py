"""Broken: an upper-case vendor domain is not a valid extended resource name."""

from _baseline import Plugin, main


class InvalidResourceName(Plugin):
    resource = "Example.com/gpu"


if __name__ == "__main__":
    main(InvalidResourceName)
