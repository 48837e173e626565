"""`kubedevice plugin fake|paths` as real processes against the fake kubelet."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import grpc
import pytest

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from tests.plugin_kubelet import FakeKubelet, exists, plugin_dir
from tests.plugin_process import KUBEDEVICE, PluginProcess, fields

__all__ = ["plugin_dir"]


def allocate_request(*ids: str) -> dp.AllocateRequest:
    return dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=ids)])


async def test_fake_with_numa_cdi_preferred_and_prestart(plugin_dir: str) -> None:
    async with (
        FakeKubelet(plugin_dir) as kubelet,
        PluginProcess(
            "fake",
            "--resource", "example.com/fake",
            "--devices", "4",
            "--numa-nodes", "2",
            "--cdi", "--preferred", "--prestart",
            "--cdi-spec-dir", os.path.join(plugin_dir, "cdi"),
            "--plugin-dir", plugin_dir,
        ) as plugin,
    ):  # fmt: skip
        serving = await plugin.expect("serving ")
        registered = await plugin.expect("registered ")
        registration = await kubelet.wait_registrations(1)
        assert fields(serving)["endpoint"] == os.path.join(plugin_dir, registration.request.endpoint)
        assert fields(registered)["endpoint"] == registration.request.endpoint
        assert (
            registration.options.pre_start_required
            and registration.options.get_preferred_allocation_available
        )
        await kubelet.wait_for(lambda: bool(registration.lists), "device list")
        topology = {d.ID: [n.ID for n in d.topology.nodes] for d in registration.lists[-1].devices}
        assert topology == {"fake-0": [0], "fake-1": [1], "fake-2": [0], "fake-3": [1]}

        stub = registration.stub
        response = await stub.Allocate(allocate_request("fake-3", "fake-1"))
        container = response.container_responses[0]
        assert dict(container.envs) == {"FAKE_DEVICES": "fake-1,fake-3"}
        assert [c.name for c in container.cdi_devices] == [
            "example.com/fake=fake-1",
            "example.com/fake=fake-3",
        ]
        assert fields(await plugin.expect("allocate ")) == {
            "resource": "example.com/fake",
            "devices": "fake-3,fake-1",
            "result": "ok",
        }

        preferred = await stub.GetPreferredAllocation(
            dp.PreferredAllocationRequest(
                container_requests=[
                    dp.ContainerPreferredAllocationRequest(
                        available_deviceIDs=["fake-0", "fake-1", "fake-2", "fake-3"],
                        must_include_deviceIDs=["fake-1"],
                        allocation_size=2,
                    )
                ]
            )
        )
        assert list(preferred.container_responses[0].deviceIDs) == ["fake-1", "fake-3"]

        await stub.PreStartContainer(dp.PreStartContainerRequest(devices_ids=["fake-1"]))
        assert fields(await plugin.expect("pre-start "))["result"] == "ok"

        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.Allocate(allocate_request("fake-9"))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert caught.value.details() == "Allocate: unknown example.com/fake devices: fake-9"


async def test_fake_health_file_flips_health_both_ways(plugin_dir: str) -> None:
    health = os.path.join(plugin_dir, "health.json")
    async with (
        FakeKubelet(plugin_dir) as kubelet,
        PluginProcess(
            "fake", "--resource", "example.com/fake", "--devices", "2", "--unhealthy", "fake-1",
            "--health-file", health, "--poll-interval", "0.05", "--plugin-dir", plugin_dir,
        ) as plugin,
    ):  # fmt: skip
        await plugin.expect("registered ")
        await kubelet.wait_health({"fake-0": "Healthy", "fake-1": "Unhealthy"})
        write(health, json.dumps(["fake-0"]))
        await kubelet.wait_health({"fake-0": "Unhealthy", "fake-1": "Unhealthy"})
        assert (
            fields(await plugin.expect("devices healthy=0") if False else await plugin.expect("devices "))
            != {}
        )
        write(health, "[]")
        await kubelet.wait_health({"fake-0": "Healthy", "fake-1": "Unhealthy"})
        # A broken file is reported and changes nothing; fixing it is picked up.
        write(health, "[not json")
        await plugin.expect_stderr("not valid JSON")
        write(health, '["fake-0", "fake-7"]')
        await plugin.expect_stderr("unknown device IDs: fake-7")
        write(health, '["fake-0"] ')
        await kubelet.wait_health({"fake-0": "Unhealthy", "fake-1": "Unhealthy"})
        code, _, stderr = await plugin.terminate()
        assert code == 0
        assert "Traceback" not in stderr
        lines = plugin.lines
        assert [fields(line)["unhealthy"] for line in lines if line.startswith("devices ")] == [
            "1",
            "2",
            "1",
            "2",
        ]


async def test_paths_exposes_matching_files_and_follows_them(plugin_dir: str) -> None:
    files = os.path.join(plugin_dir, "devs")
    os.mkdir(files)
    for name in ("ttyUSB0", "ttyUSB1", "other"):
        write(os.path.join(files, name), "")
    pattern = os.path.join(files, "ttyUSB*")
    derived = files.strip("/").replace("/", "_")
    async with (
        FakeKubelet(plugin_dir) as kubelet,
        PluginProcess(
            "paths", "--resource", "example.com/serial", "--glob", pattern, "--count", "2",
            "--poll-interval", "0.05", "--plugin-dir", plugin_dir,
        ) as plugin,
    ):  # fmt: skip
        await plugin.expect("registered ")
        ids = [f"{derived}_ttyUSB{n}-{k}" for n in (0, 1) for k in (0, 1)]
        await kubelet.wait_health(dict.fromkeys(ids, "Healthy"))

        response = await kubelet.last.stub.Allocate(allocate_request(ids[0], ids[1], ids[2]))
        specs = [
            (d.container_path, d.host_path, d.permissions) for d in response.container_responses[0].devices
        ]
        usb0, usb1 = (os.path.join(files, f"ttyUSB{n}") for n in (0, 1))
        assert specs == [(usb0, usb0, "rw"), (usb1, usb1, "rw")]

        write(os.path.join(files, "ttyUSB2"), "")
        with_new = dict.fromkeys(ids, "Healthy") | {
            f"{derived}_ttyUSB2-0": "Healthy",
            f"{derived}_ttyUSB2-1": "Healthy",
        }
        await kubelet.wait_health(with_new)
        os.unlink(usb0)
        await kubelet.wait_health({k: v for k, v in with_new.items() if "ttyUSB0" not in k})


async def test_paths_mount_mode(plugin_dir: str) -> None:
    target = os.path.join(plugin_dir, "fuse")
    write(target, "")
    async with (
        FakeKubelet(plugin_dir) as kubelet,
        PluginProcess(
            "paths", "--resource", "example.com/fuse", "--glob", target, "--mount", "--plugin-dir", plugin_dir
        ) as plugin,
    ):
        await plugin.expect("registered ")
        registration = await kubelet.wait_registrations(1)
        await kubelet.wait_for(lambda: bool(registration.lists), "device list")
        (device,) = registration.lists[-1].devices
        response = await registration.stub.Allocate(allocate_request(device.ID))
        container = response.container_responses[0]
        assert [(m.container_path, m.host_path, m.read_only) for m in container.mounts] == [
            (target, target, False)
        ]
        assert not container.devices


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_stop_signal_exits_zero_and_removes_the_socket(plugin_dir: str, sig: int) -> None:
    async with (
        FakeKubelet(plugin_dir) as kubelet,
        PluginProcess(
            "fake",
            "--resource",
            "example.com/fake",
            "--devices",
            "1",
            env={"KUBEDEVICE_PLUGIN_DIR": plugin_dir},
        ) as plugin,
    ):
        socket_path = fields(await plugin.expect("serving "))["endpoint"]
        await plugin.expect("registered ")
        registration = await kubelet.wait_registrations(1)
        assert exists(socket_path)
        code, rest, _ = await plugin.terminate(sig)
        assert code == 0
        assert rest.splitlines()[-1] == "stopped resource=example.com/fake"
        assert not exists(socket_path)
        await kubelet.wait_for(registration.stream_ended.is_set, "stream end")


async def test_kubelet_restart_and_sighup_reregister_the_process(plugin_dir: str) -> None:
    async with PluginProcess(
        "fake", "--resource", "example.com/fake", "--devices", "1", "--plugin-dir", plugin_dir
    ) as plugin:
        kubelet = FakeKubelet(plugin_dir, cleanup_on_start=True)
        await kubelet.start()
        await plugin.expect("registered ")
        await kubelet.stop()
        kubelet = FakeKubelet(plugin_dir, cleanup_on_start=True)
        await kubelet.start()
        await plugin.expect("kubelet-restart ")
        assert fields(await plugin.expect("re-registered "))["count"] == "2"
        plugin.process.send_signal(signal.SIGHUP)
        assert fields(await plugin.expect("re-registered "))["count"] == "3"
        await kubelet.wait_registrations(2)
        code, _, _ = await plugin.terminate()
        assert code == 0
        await kubelet.stop()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["fake", "--resource", "example.com/fake", "--devices", "-1"], "--devices"),
        (["fake", "--resource", "example.com/fake", "--devices", "two"], "--devices"),
        (["fake", "--devices", "2"], "give --resource (the device plugin API), --driver (DRA) or both"),
        (["fake", "--resource", "fake", "--devices", "2"], "resource name 'fake'"),
        (["fake", "--resource", "example.com/fake", "--devices", "2", "--unhealthy", "fake-5"], "fake-5"),
        (["fake", "--resource", "example.com/fake", "--devices", "2", "--numa-layout", "zigzag"], "zigzag"),
        (["fake", "--resource", "example.com/fake", "--devices", "2", "--log-level", "loud"], "loud"),
        (["fake", "--resource", "example.com/fake", "--devices", "2", "--frobnicate"], "--frobnicate"),
        (["fake", "--resource", "example.com/fake", "--devices", "2", "--replicas", "0"], "'--replicas'"),
        (["fake", "--resource", "example.com/fake", "--devices", "2", "--replicas", "-1"], "'--replicas'"),
        (["fake", "--resource", "example.com/fake", "--devices", "2", "--refuse-multiple"], "--replicas N"),
        (["fake", "--driver", "gpu.example.com", "--devices", "2", "--taint", "k:Sometimes"], '"Sometimes"'),
        (["fake", "--driver", "gpu.example.com", "--devices", "2", "--taint", "k:None@gpu-7"], "gpu-7"),
        (
            ["fake", "--driver", "gpu.example.com", "--devices", "1", "--health-taint", "bad key:NoExecute"],
            "--health-taint 'bad key:NoExecute': taint bad key:NoExecute: taint.key: Invalid value",
        ),
        (["fake", "--resource", "example.com/fake", "--devices", "2", "--partitions", "2"], "DRA features"),
        (
            ["fake", "--driver", "net.example.com", "--devices", "1", "--net", "--shared"],
            "--net publishes NICs of their own shape — drop --partitions and --shared",
        ),
        (["paths", "--resource", "example.com/x", "--glob", "relative/*"], "absolute"),
        (["paths", "--resource", "example.com/x", "--glob", "/dev/null", "--count", "0"], "--count"),
        (["no-such-plugin"], "no-such-plugin"),
    ],
)
def test_bad_flags_exit_2_with_one_line(plugin_dir: str, args: list[str], message: str) -> None:
    result = subprocess.run(
        [KUBEDEVICE, "plugin", *args, "--plugin-dir", plugin_dir]
        if args[0] != "no-such-plugin"
        else [KUBEDEVICE, "plugin", *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("error: ") and message in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_unusable_plugin_dir_exits_2(plugin_dir: str) -> None:
    blocker = os.path.join(plugin_dir, "file")
    write(blocker, "")
    result = subprocess.run(
        [KUBEDEVICE, "plugin", "fake", "--resource", "example.com/fake", "--devices", "1", "--plugin-dir",
         os.path.join(blocker, "sub")],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: plugin fake: plugin directory {os.path.join(blocker, 'sub')} can never exist: {blocker} is "
        "a file, not a folder — give the kubelet's device plugin directory"
    ]


def write(path: str, text: str) -> None:
    # Write-then-rename so the plugin never reads a half-written file.
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)
