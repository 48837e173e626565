"""The pytest plugin `kubedevice` (entry point group `pytest11`): the `kubelet`, `dra_kubelet` and `node`
fixtures.

The fixtures are async (they live in the test's event loop), so they need pytest-asyncio, installed with
`pip install 'kubedevice[testing]'`. Without it they fail with one line saying so rather than breaking
pytest's start in every project where kubedevice is installed. Heavy imports wait for the first fixture.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from kubedevice.testing.dra_kubelet import StandInDRAKubelet
    from kubedevice.testing.kubelet import StandInKubelet
    from kubedevice.testing.node import Node

try:
    import pytest_asyncio
except ImportError:  # the fixtures then say what to install
    pytest_asyncio = None  # type: ignore[assignment]

TIMEOUT_INI = "kubedevice_timeout"
_TIMEOUT = pytest.StashKey[float]()
NODE_MARKER = "kubedevice_node"
_MISSING = (
    "the kubedevice fixtures need pytest-asyncio: pip install 'kubedevice[testing]' "
    "(and mark async tests with @pytest.mark.asyncio or set asyncio_mode = auto)"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        TIMEOUT_INI, "seconds each wait of the kubelet and node fixtures allows before failing", default="10"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{NODE_MARKER}(*args): extra `kubedevice node` options for the node fixture"
    )
    # Checked once at start: a bad value stops the run with one line instead of failing every test.
    config.stash[_TIMEOUT] = _timeout(config)


def _fixture(function: Callable[..., Any]) -> Any:
    if pytest_asyncio is not None:
        # The test's own loop: the fixtures' sockets and tasks must live where the test awaits them.
        return pytest_asyncio.fixture(function, loop_scope="function")

    @functools.wraps(function)
    def missing(*args: object, **kwargs: object) -> None:
        pytest.fail(_MISSING, pytrace=False)

    return pytest.fixture(missing)


def _timeout(config: pytest.Config) -> float:
    value = str(config.getini(TIMEOUT_INI))
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if seconds <= 0:
        raise pytest.UsageError(f"{TIMEOUT_INI} = {value!r}: want a positive number of seconds")
    return seconds


def _short_tempdir(prefix: str) -> Path:
    # Unix socket paths are limited to 107 bytes; a long $TMPDIR would break them.
    base = "/tmp" if os.path.isdir("/tmp") else None
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base))


@_fixture
async def kubelet(request: pytest.FixtureRequest) -> AsyncIterator[StandInKubelet]:
    """A stand-in kubelet serving kubelet.sock in a temporary device plugin folder (`kubelet.plugin_dir`)."""
    from kubedevice.testing.kubelet import StandInKubelet

    directory = _short_tempdir("kdk-")
    stand_in = StandInKubelet(directory, timeout=request.config.stash[_TIMEOUT])
    try:
        await stand_in.start()
        yield stand_in
    finally:
        await stand_in.close()
        shutil.rmtree(directory, ignore_errors=True)


@_fixture
async def dra_kubelet(request: pytest.FixtureRequest) -> AsyncIterator[StandInDRAKubelet]:
    """The node side of DRA (the DRA manager, plugins_registry, the daemon's claim API) in a temporary
    kubelet folder (`dra_kubelet.kubelet_dir`); claims are given inline."""
    from kubedevice.testing.dra_kubelet import StandInDRAKubelet

    directory = _short_tempdir("kdd-")
    stand_in = StandInDRAKubelet(directory, timeout=request.config.stash[_TIMEOUT])
    try:
        await stand_in.start()
        yield stand_in
    finally:
        await stand_in.close()
        shutil.rmtree(directory, ignore_errors=True)


@_fixture
async def node(request: pytest.FixtureRequest) -> AsyncIterator[Node]:
    """The node daemon (`kubedevice node`) as a process under a temporary root; plugins use `node.plugin_dir`.

    `@pytest.mark.kubedevice_node("--numa-nodes", "2")` passes extra options to the daemon.
    """
    from kubedevice.testing.node import Node

    marker = request.node.get_closest_marker(NODE_MARKER)
    args = tuple(str(a) for a in marker.args) if marker is not None else ()
    root = _short_tempdir("kdn-")
    daemon = Node(root, *args, timeout=request.config.stash[_TIMEOUT])
    try:
        await daemon.start()
        yield daemon
    finally:
        await daemon.close()
        shutil.rmtree(root, ignore_errors=True)
