"""The checker's stand-in kubelet and its in-process API, over real unix sockets in temporary folders."""

from __future__ import annotations

import shutil
import socket
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import grpc.aio
import pytest

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from kubedevice.conformance import CommandError, ConformanceOptions, Result, run_conformance
from kubedevice.conformance.kubelet import FakeKubelet, Refusal, RegistrationAttempt

BASELINE = Path(__file__).resolve().parent.parent / "conformance_plugins" / "_baseline.py"
OPTIONS = dp.DevicePluginOptions(pre_start_required=True)


class OptionsOnly(dp_grpc.DevicePluginServicer):
    async def GetDevicePluginOptions(
        self, request: dp.Empty, context: grpc.aio.ServicerContext[dp.Empty, dp.DevicePluginOptions]
    ) -> dp.DevicePluginOptions:
        return OPTIONS


@pytest.fixture
def plugin_dir() -> Iterator[Path]:
    # tmp_path can be too long for a unix socket path (107 bytes).
    directory = Path(tempfile.mkdtemp(prefix="kdc-test-", dir="/tmp"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
async def kubelet(plugin_dir: Path) -> AsyncIterator[FakeKubelet]:
    stand_in = FakeKubelet(plugin_dir, dial_timeout_s=0.5)
    await stand_in.start()
    yield stand_in
    await stand_in.stop()


async def serve(path: Path, servicer: dp_grpc.DevicePluginServicer, *, start: bool = True) -> grpc.aio.Server:
    server = grpc.aio.server()
    dp_grpc.add_DevicePluginServicer_to_server(servicer, server)
    server.add_insecure_port(f"unix://{path}")
    if start:
        await server.start()
    return server


async def register(kubelet: FakeKubelet, **fields: str) -> tuple[grpc.StatusCode, str, RegistrationAttempt]:
    request = {"version": "v1beta1", "endpoint": "p.sock", "resource_name": "example.com/dev", **fields}
    async with grpc.aio.insecure_channel(f"unix://{kubelet.socket_path}") as channel:
        try:
            await dp_grpc.RegistrationStub(channel).Register(dp.RegisterRequest(**request), timeout=10)
            code, details = grpc.StatusCode.OK, ""
        except grpc.aio.AioRpcError as err:
            code, details = err.code(), err.details() or ""
    attempt = await kubelet.next_attempt(5)
    assert attempt is not None
    return code, details, attempt


async def test_a_serving_plugin_is_accepted_with_the_options_it_serves(kubelet: FakeKubelet) -> None:
    server = await serve(kubelet.plugin_dir / "p.sock", OptionsOnly())
    try:
        code, _, attempt = await register(kubelet)
        assert code is grpc.StatusCode.OK
        assert attempt.accepted and attempt.options == OPTIONS
        assert attempt.socket_path == str(kubelet.plugin_dir / "p.sock")
        assert attempt.channel is not None
    finally:
        await server.stop(0)


@pytest.mark.parametrize(
    ("fields", "refusal", "text"),
    [
        ({"version": "v1"}, Refusal.VERSION, 'requested API version "v1" is not supported by kubelet'),
        ({"resource_name": "gpu"}, Refusal.RESOURCE_NAME, 'the ResourceName "gpu" is invalid'),
        ({"resource_name": "kubernetes.io/gpu"}, Refusal.RESOURCE_NAME, "is invalid"),
        ({"endpoint": "../escape.sock"}, Refusal.ENDPOINT, 'invalid endpoint "../escape.sock": it escapes'),
        ({"endpoint": "missing.sock"}, Refusal.NOT_SERVING, "failed to dial device plugin"),
    ],
)
async def test_bad_registrations_get_the_kubelets_error(
    kubelet: FakeKubelet, fields: dict[str, str], refusal: Refusal, text: str
) -> None:
    code, details, attempt = await register(kubelet, **fields)
    assert code is grpc.StatusCode.UNKNOWN
    assert text in details
    assert attempt.refusal is refusal and not attempt.accepted and attempt.channel is None


async def test_a_socket_that_is_bound_but_not_serving_is_refused(kubelet: FakeKubelet) -> None:
    server = await serve(kubelet.plugin_dir / "p.sock", OptionsOnly(), start=False)
    try:
        code, _, attempt = await register(kubelet)
        assert code is grpc.StatusCode.UNKNOWN
        assert attempt.refusal is Refusal.NOT_SERVING
        assert attempt.reason.endswith("the socket did not answer")
    finally:
        await server.stop(0)


async def test_a_plugin_without_options_is_refused(kubelet: FakeKubelet) -> None:
    server = await serve(kubelet.plugin_dir / "p.sock", dp_grpc.DevicePluginServicer())
    try:
        code, details, attempt = await register(kubelet)
        assert code is grpc.StatusCode.UNKNOWN
        assert attempt.refusal is Refusal.OPTIONS
        assert details.startswith("failed to get device plugin options: UNIMPLEMENTED")
    finally:
        await server.stop(0)


async def test_restart_deletes_sockets_keeps_files_and_creates_kubelet_sock_again(
    kubelet: FakeKubelet,
) -> None:
    directory = kubelet.plugin_dir
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(directory / "stale.sock"))
    stale.close()
    (directory / "kubelet_internal_checkpoint").write_text("{}")
    before = kubelet.socket_path.stat()
    created = await kubelet.restart()
    assert created > 0
    assert sorted(path.name for path in directory.iterdir()) == [
        "kubelet.sock",
        "kubelet_internal_checkpoint",
    ]
    after = kubelet.socket_path.stat()
    assert (after.st_ino, after.st_ctime_ns) != (before.st_ino, before.st_ctime_ns)
    # And it serves again.
    code, _, attempt = await register(kubelet, version="v0")
    assert code is grpc.StatusCode.UNKNOWN and attempt.refusal is Refusal.VERSION


async def test_run_conformance_in_process_cleans_up(tmp_path: Path) -> None:
    seen = tmp_path / "plugin_dir.txt"
    command = (
        "sh",
        "-c",
        f'echo "$1" > {seen}; exec "$0" {BASELINE} "$1"',
        sys.executable,
        "{plugin_dir}",
    )
    report = await run_conformance(
        ConformanceOptions(command=command, timeout_s=8, restarts=1, absence_s=0.2)
    )
    assert report.passed, report.to_json()
    assert {row.result for row in report.checks} <= {Result.PASS, Result.SKIP}
    used = Path(seen.read_text().strip())
    assert used.name == "dp" and str(used).startswith("/tmp/kdc-")
    assert not used.parent.exists()


async def test_a_command_that_cannot_run_raises_command_error(tmp_path: Path) -> None:
    plain = tmp_path / "not-a-program"
    plain.write_text("nothing\n")
    with pytest.raises(CommandError, match="cannot run"):
        await run_conformance(ConformanceOptions(command=(str(plain),), timeout_s=2, restarts=0))
