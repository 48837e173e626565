"""Fixtures shared by the integration tests."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.waiting import short_tempdir


@pytest.fixture
def root() -> Iterator[Path]:
    """A temporary folder short enough for unix socket paths, removed afterwards."""
    d = short_tempdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)
