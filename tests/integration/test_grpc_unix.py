"""serve_unix: a grpc.aio server on a unix socket, over whatever a crash left at the path, with the mode
asked; one line when the socket cannot be bound."""

from __future__ import annotations

import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import grpc.aio
import pytest

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from kubedevice.grpc_unix import UnixBindError, serve_unix


class _Registration(dp_grpc.RegistrationServicer):
    async def Register(self, request: dp.RegisterRequest, context: grpc.aio.ServicerContext) -> dp.Empty:
        return dp.Empty()


@pytest.fixture
def folder() -> Iterator[Path]:
    # Short: a unix socket's path must fit in 108 bytes, which pytest's tmp_path may not.
    with tempfile.TemporaryDirectory(prefix="kd-") as name:
        yield Path(name)


def _add(server: grpc.aio.Server) -> None:
    dp_grpc.add_RegistrationServicer_to_server(_Registration(), server)


async def test_serves_over_a_stale_file_with_the_mode_asked(folder: Path) -> None:
    path = folder / "kubelet.sock"
    path.write_text("left by a crash")
    server = await serve_unix(path, _add, mode=0o660)
    try:
        info = path.stat()
        assert stat.S_ISSOCK(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o660
        async with grpc.aio.insecure_channel(f"unix://{path}") as channel:
            await dp_grpc.RegistrationStub(channel).Register(dp.RegisterRequest(), timeout=5)
    finally:
        await server.stop(grace=None)


async def test_a_socket_that_cannot_be_bound_is_one_line(folder: Path) -> None:
    path = folder / "missing" / "plugin.sock"
    with pytest.raises(UnixBindError) as err:
        await serve_unix(path, _add)
    assert str(err.value).startswith(f"cannot bind {path}: ")
    assert "\n" not in str(err.value)
    assert err.value.path == path
