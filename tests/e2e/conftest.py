"""Fixtures shared by the end-to-end tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.node_helpers import NodeProcesses, node_processes


@pytest.fixture
def node() -> Iterator[NodeProcesses]:
    """A node daemon and its plugins as processes under a fresh root, all killed at the end."""
    yield from node_processes()
