"""Helpers for the reliability tests: a fork server for cheap real processes, and a crash worker.

Killing a process 200 times costs 200 process starts; a fresh `kubedevice` process spends most of its
start importing grpc, typer and rich. The fork server imports them once, then forks a real process per
request: each child runs the real CLI (`kubedevice node ...`, `kubedevice checkpoint verify ...`) or the
crash worker below, has its own pid, and is SIGKILLed for real. It never creates a gRPC object itself,
so the children start from a clean gRPC state.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import kubedevice.cli
from kubedevice.manager import AdmissionError, Container, DeviceManager, Pod
from kubedevice.node.daemon import CHECKPOINT_FAULT_ENV, checkpoint_fault_from_env
from tests.integration.fakeplugin import FakePlugin, make_devices
from tests.waiting import poll

REPO = Path(__file__).resolve().parent.parent
DEADLINE_S = 20.0
#: Temporary checkpoint files are named like Go's os.CreateTemp(dir, "."): a dot and digits.
TEMP_FILE = re.compile(r"\.\d+")


def wait_until(condition: Callable[[], Any], what: str, deadline_s: float = DEADLINE_S) -> Any:
    return poll(condition, what, deadline_s, interval=0.01)


def temp_files(directory: Path) -> list[str]:
    """Leftover temporary checkpoint files in `directory`."""
    try:
        return sorted(n for n in os.listdir(directory) if TEMP_FILE.fullmatch(n))
    except FileNotFoundError:
        return []


# ----------------------------------------------------------------------------------------------------
# Fork server


class ForkServer:
    """A pre-imported parent that forks real processes on request; `close()` kills what is left."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from tests.reliability_helpers import fork_server_main; fork_server_main()",
            ],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.live: set[int] = set()
        #: Exit codes of the reaped children (a pid is reaped once).
        self.codes: dict[int, int] = {}

    def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork server died with {self._proc.wait()}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def spawn(self, argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None) -> int:
        """Fork `kubedevice ARGV...` (argv[0] "worker": the crash worker); output goes to `log`."""
        pid = int(
            self._call({"op": "spawn", "argv": list(argv), "env": dict(env or {}), "log": str(log)})["pid"]
        )
        self.live.add(pid)
        return pid

    def wait(self, pid: int) -> int:
        """Reap `pid`; its exit code (negative: killed by that signal)."""
        if pid not in self.codes:
            self.codes[pid] = int(self._call({"op": "wait", "pid": pid})["code"])
            self.live.discard(pid)
        return self.codes[pid]

    def exited(self, pid: int) -> int | None:
        """`pid`'s exit code if it has ended (it is then reaped), else None."""
        if pid not in self.codes:
            code = self._call({"op": "poll", "pid": pid})["code"]
            if code is None:
                return None
            self.codes[pid] = int(code)
            self.live.discard(pid)
        return self.codes[pid]

    def kill(self, pid: int, sig: int = signal.SIGKILL) -> int:
        if pid not in self.codes:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        return self.wait(pid)

    def run(self, argv: Sequence[str], log: Path) -> tuple[int, str]:
        """Run a `kubedevice` command to its end: (exit code, its output)."""
        log.unlink(missing_ok=True)
        code = self.wait(self.spawn(argv, log))
        return code, log.read_text(errors="replace")

    def close(self) -> None:
        for pid in list(self.live):
            self.kill(pid)
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._proc.wait(timeout=DEADLINE_S)


def _child(argv: list[str], env: dict[str, str], log: str) -> None:
    code = 70
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.environ.update(env)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if argv and argv[0] == "worker":
            asyncio.run(_crash_worker(Path(argv[1])))
            code = 0
        else:
            sys.argv = ["kubedevice", *argv]
            kubedevice.cli.run()
            code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def fork_server_main() -> None:
    children: set[int] = set()
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "spawn":
            pid = os.fork()
            if pid == 0:
                _child(request["argv"], request["env"], request["log"])
            children.add(pid)
            answer: dict[str, Any] = {"pid": pid}
        else:
            flags = os.WNOHANG if request["op"] == "poll" else 0
            pid, status = os.waitpid(request["pid"], flags)
            if pid == 0:
                answer = {"code": None}
            else:
                children.discard(pid)
                answer = {"code": os.waitstatus_to_exitcode(status)}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


# ----------------------------------------------------------------------------------------------------
# Crash worker: a device manager and its plugin in one process, driven over a unix socket

WORKER_RESOURCE = "example.com/crash"
WORKER_DEVICES = 8


def worker_pod(uid: str, count: int) -> Pod:
    return Pod(uid=uid, namespace="default", name=uid, containers=[Container("c", {WORKER_RESOURCE: count})])


async def _crash_worker(root: Path) -> None:
    """Serve `root/worker.sock`: one JSON command per line, one JSON answer per line.

    Commands: {"op": "state"} -> the pods restored from the checkpoint (before any garbage collection);
    {"op": "ready", "active": [uids]} -> sources ready, the others' devices freed;
    {"op": "admit", "uid": u, "count": n} -> {"devices": [...]} or {"error": "..."}.
    The fault hook of KUBEDEVICE_TEST_CHECKPOINT_FAULT may SIGKILL the process inside any checkpoint write.
    """
    plugin_dir = root / "dp"
    manager = DeviceManager(plugin_dir, checkpoint_fault=checkpoint_fault_from_env(os.environ))
    manager.sources_ready = False
    await manager.start()
    restored = {uid: _devices_of(manager, uid) for uid in sorted(manager.pod_uids())}
    plugin = FakePlugin(
        plugin_dir / f"crash-{os.getpid()}.sock", WORKER_RESOURCE, make_devices(WORKER_DEVICES, numa=[0, 1])
    )
    await plugin.start()
    await plugin.register(manager.socket_path)
    while manager.get_capacity()[1].get(WORKER_RESOURCE) != WORKER_DEVICES:
        await manager.wait_for_change(manager.version)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            request = json.loads(line)
            answer: dict[str, Any]
            if request["op"] == "state":
                answer = {"pods": restored, "checkpoint_error": manager.checkpoint_error}
            elif request["op"] == "ready":
                manager.sources_ready = True
                answer = {"removed": manager.update_allocated_devices(request["active"])}
            else:
                pod = worker_pod(request["uid"], request["count"])
                try:
                    await manager.allocate(pod, pod.containers[0])
                    answer = {"devices": _devices_of(manager, pod.uid)}
                except AdmissionError as err:
                    answer = {"error": str(err)}
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()

    server = await asyncio.start_unix_server(handle, str(root / "worker.sock"))
    async with server:
        await server.serve_forever()


def _devices_of(manager: DeviceManager, uid: str) -> list[str]:
    held = manager.get_devices(uid, "c") or {}
    return sorted(d for per_resource in held.values() for d in per_resource)


class WorkerClient:
    """The test's side of one crash worker's socket."""

    def __init__(self, path: Path) -> None:
        self._sock = socket.socket(socket.AF_UNIX)
        self._sock.settimeout(DEADLINE_S)
        self._sock.connect(str(path))
        self._file = self._sock.makefile("rwb")

    def send(self, request: dict[str, Any]) -> None:
        self._file.write(json.dumps(request).encode() + b"\n")
        self._file.flush()

    def receive(self) -> dict[str, Any] | None:
        """The next answer, or None when the worker died."""
        try:
            line = self._file.readline()
        except OSError:
            return None
        if not line:
            return None
        answer: dict[str, Any] = json.loads(line)
        return answer

    def call(self, request: dict[str, Any]) -> dict[str, Any] | None:
        try:
            self.send(request)
        except OSError:
            return None
        return self.receive()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()
        self._sock.close()


def fault_env(spec: str | None) -> dict[str, str]:
    return {CHECKPOINT_FAULT_ENV: spec} if spec else {}
