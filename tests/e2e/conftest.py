"""Fixtures shared by the end-to-end tests."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.node_helpers import NodeProcesses, node_processes


@pytest.fixture
def node() -> Iterator[NodeProcesses]:
    """A node daemon and its plugins as processes under a fresh root, all killed at the end."""
    yield from node_processes()


@pytest.fixture(autouse=True)
def _no_columns_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Piped tables are as wide as `COLUMNS` asks: the tests' own expectations are for a `COLUMNS` they
    set themselves, never one a developer's shell exports or GNU readline puts in the process's environment
    when something imports it (behind os.environ's back, so unset there too)."""
    monkeypatch.delenv("COLUMNS", raising=False)
    os.unsetenv("COLUMNS")
