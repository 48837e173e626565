"""A claim's `status.devices` (KEP-4817) written by its drivers through the status API of a real daemon:
`PUT /claims/<ns>/<name>/status?driver=`, read back by `GET /claims`, `GET /claims/<ns>/<name>`,
`kubedevice claims` (table and `--json`), written by hand with `kubedevice claims set-status`; kept across a
SIGKILL, gone with the allocation; one driver's update never erases another's; each refusal in its words."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from kubedevice.statusapi.client import ClaimStatusRefused, StatusClient
from tests.node_dra_helpers import (
    DRIVER,
    GPU_CLASS,
    NODE,
    DRANodeProcesses,
    claim_yaml,
    dra_node_processes,
    pod_yaml,
)
from tests.node_helpers import CLI, wait_for

NIC = "nic.example.com"
T = "2026-07-24T10:00:00Z"
#: A claim the manifest allocates from two drivers (no plugin needed to write its status).
TWO_DRIVERS = f"""apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: two}}
spec:
  devices:
    requests:
    - {{name: gpu, exactly: {{deviceClassName: gpu}}}}
    - {{name: nic, exactly: {{deviceClassName: nic}}}}
status:
  allocation:
    devices:
      results:
      - {{request: gpu, driver: {DRIVER}, pool: {NODE}, device: gpu-0}}
      - {{request: nic, driver: {NIC}, pool: {NODE}, device: nic-0}}
"""


@pytest.fixture
def node() -> Iterator[DRANodeProcesses]:
    yield from dra_node_processes()


def entry(driver: str, device: str, ready: str = "True", **more: Any) -> dict[str, Any]:
    condition = {"type": "Ready", "status": ready, "reason": "Configured", "lastTransitionTime": T}
    return {"driver": driver, "pool": NODE, "device": device, "conditions": [condition], **more}


def put(node: DRANodeProcesses, name: str, driver: str, *devices: dict[str, Any]) -> dict[str, Any]:
    client = StatusClient.under(node.root)
    return asyncio.run(client.put_claim_status("default", name, driver=driver, devices=list(devices)))


def refused(node: DRANodeProcesses, name: str, driver: str, *devices: dict[str, Any]) -> ClaimStatusRefused:
    with pytest.raises(ClaimStatusRefused) as caught:
        put(node, name, driver, *devices)
    return caught.value


def cli(node: DRANodeProcesses, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args, "--root-dir", str(node.root)], input=stdin, capture_output=True, text=True, timeout=30
    )


def listed(node: DRANodeProcesses, name: str) -> list[dict[str, Any]]:
    """The claim's `statusDevices` in `/claims`."""
    claim = node.claim(name)
    assert claim is not None, f"no claim {name} in /claims"
    return list(claim["statusDevices"])


def as_written(devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries as the API server shows them (each condition's message written out)."""
    return [{**d, "conditions": [{**c, "message": ""} for c in d["conditions"]]} for d in devices]


def test_a_drivers_status_is_shown_kept_across_a_sigkill_and_gone_with_the_allocation(
    node: DRANodeProcesses,
) -> None:
    node.start_daemon()
    node.start_dra_plugin(devices=2)
    node.write_manifest("claims.yaml", GPU_CLASS + "---\n" + claim_yaml("c1", None))
    node.write_manifest("p.yaml", pod_yaml("p", "c1"))
    node.wait_phase("p", "Running")
    [result] = node.try_status("/claims/default/c1")["status"]["allocation"]["devices"]["results"]
    device = result["device"]
    network = {"interfaceName": "eth1", "ips": ["10.0.0.5/24"], "hardwareAddress": "aa:bb:cc:dd:ee:ff"}
    status = entry(DRIVER, device, data={"model": "A100"}, networkData=network)

    answer = put(node, "c1", DRIVER, status)
    assert answer["status"]["devices"] == as_written([status])
    assert node.try_status("/claims/default/c1")["status"] == answer["status"]
    assert node.try_status("/claims/default/c1/status") == answer
    assert listed(node, "c1") == as_written([status])
    as_json = json.loads(cli(node, "claims", "--json").stdout)
    assert [c["statusDevices"] for c in as_json["claims"]] == [as_written([status])]
    table = cli(node, "claims").stdout
    assert (
        f"  default/c1 {DRIVER}/{NODE}/{device}: Ready=True; eth1 10.0.0.5/24 aa:bb:cc:dd:ee:ff; data: model"
        in (table.splitlines())
    ), table

    # A device the claim was not allocated: refused by the daemon, the entries stay as they were.
    bad = node.root / "bad.json"
    bad.write_text(json.dumps({"devices": [entry(DRIVER, "gpu-7")]}))
    run = cli(node, "claims", "set-status", "default/c1", "--driver", DRIVER, "--file", str(bad))
    assert run.returncode == 1
    assert run.stderr == (
        'error: claims set-status: ResourceClaim.resource.k8s.io "c1" is invalid: status.devices[0]: '
        f"Invalid value: {DRIVER}/{NODE}/gpu-7: must be an allocated device in the claim — fix the entries "
        "and run it again\n"
    )
    assert listed(node, "c1") == as_written([status])

    assert node.kill_daemon(signal.SIGKILL) == -signal.SIGKILL
    node.start_daemon()
    node.wait_phase("p", "Running")
    assert listed(node, "c1") == as_written([status])

    # The pod goes: the daemon deallocates the claim, and its status.devices goes with the allocation.
    (node.paths.manifests / "p.yaml").unlink()
    node.wait_gone("p")
    wait_for(lambda: (node.claim("c1") or {}).get("allocation", 1) is None, "c1 to be deallocated")
    assert listed(node, "c1") == []
    assert node.try_status("/claims/default/c1")["status"] == {}
    assert "default/c1" not in json.loads((node.root / "dra_claims.json").read_text())["claims"]
    # Not allocated: nothing to report on.
    gone = refused(node, "c1", DRIVER, status)
    assert (gone.code, gone.reason) == (409, "Conflict")
    assert str(gone) == (
        "ResourceClaim default/c1 is not allocated: status.devices names allocated devices only, write it "
        "once the claim is allocated"
    )


def test_one_drivers_update_never_erases_anothers_and_each_refusal_says_why(node: DRANodeProcesses) -> None:
    node.start_daemon()
    node.write_manifest("claims.yaml", TWO_DRIVERS + "---\n" + claim_yaml("bare", None))
    wait_for(lambda: node.claim("two") and node.claim("bare"), "the claims to be read")
    gpu, nic = entry(DRIVER, "gpu-0"), entry(NIC, "nic-0", networkData={"interfaceName": "net1"})

    # A person writes the GPU driver's entry from YAML on standard input.
    yaml = f"devices:\n- {{driver: {DRIVER}, pool: {NODE}, device: gpu-0, conditions: [{{type: Ready, "
    yaml += f"status: 'True', reason: Configured, lastTransitionTime: '{T}'}}]}}\n"
    run = cli(node, "claims", "set-status", "two", "--driver", DRIVER, "--file", "-", stdin=yaml)
    assert (run.returncode, run.stdout) == (
        0,
        f"default/two: status.devices holds 1 entry of {DRIVER} (1 in all)\n",
    )
    assert put(node, "two", NIC, nic)["status"]["devices"] == as_written([gpu, nic])
    # The GPU driver clears its entries: the NIC driver's stay.
    assert put(node, "two", DRIVER)["status"]["devices"] == as_written([nic])
    assert put(node, "two", DRIVER, gpu)["status"]["devices"] == as_written([nic, gpu])

    changed = refused(node, "two", DRIVER, gpu, entry(NIC, "nic-0", ready="False"))
    forbidden = (
        f'status.devices[1]: Forbidden: changing an entry of driver "{NIC}" requires writing as that driver; '
        f'this update writes as "{DRIVER}"'
    )
    assert (changed.code, changed.reason, str(changed)) == (
        422,
        "Invalid",
        f'ResourceClaim.resource.k8s.io "two" is invalid: {forbidden}',
    )
    assert changed.causes == [
        {"reason": "FieldValueForbidden", "message": forbidden, "field": "status.devices[1]"}
    ]
    stranger = refused(node, "two", "other.example.com")
    assert (stranger.code, stranger.reason) == (403, "Forbidden")
    missing = refused(node, "nope", DRIVER)
    assert (missing.code, str(missing)) == (404, 'resourceclaims.resource.k8s.io "nope" not found')
    assert refused(node, "bare", DRIVER).code == 409
    assert listed(node, "two") == as_written([nic, gpu])

    # A person's mistakes: exit 2, one line, nothing sent.
    for args, stdin, line in [
        (["a/b/c"], "[]", "error: claims set-status: 'a/b/c' is not [NAMESPACE/]NAME — name one claim"),
        (["two"], "", "error: claims set-status: standard input: 0 documents — give one"),
        (
            ["two"],
            "5",
            'error: claims set-status: standard input: not {"devices": [...]} nor a list of entries',
        ),
    ]:
        run = cli(node, "claims", "set-status", *args, "--driver", DRIVER, "--file", "-", stdin=stdin)
        assert (run.returncode, run.stderr.startswith(line), run.stderr.count("\n")) == (2, True, 1), (
            run.stderr
        )
    assert listed(node, "two") == as_written([nic, gpu])

    # The HTTP face: a driver named, a body that is JSON, a PUT only on the status subresource.
    client = StatusClient.under(node.root)
    for path, body, code, text in [
        ("/claims/default/two/status", b"{}", 400, "no writing driver: add ?driver=<driver name>"),
        (f"/claims/default/two/status?driver={DRIVER}", b"{devices", 400, "the body is not JSON: "),
        (
            f"/claims/default/two/status?driver={DRIVER}",
            b'{"devices": {}}',
            400,
            "cannot decode an object as",
        ),
        ("/claims/default/two", b"{}", 405, "a driver PUTs /claims/default/two/status"),
    ]:
        status, answer = asyncio.run(client.request("PUT", path, body))
        assert (status, text in json.loads(answer)["error"]) == (code, True), answer
