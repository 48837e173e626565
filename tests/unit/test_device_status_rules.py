"""A claim's `status.devices` read and validated as the API server reads and validates it: a table of bad
entries, each with the API server's words and field path; what is read back as it is written."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubedevice.resource.device_status import (
    DeviceCondition,
    StatusDecodeError,
    device_conditions,
    device_statuses_json,
    read_device_statuses,
)
from kubedevice.resource.device_status_rules import validate_device_statuses
from kubedevice.resource.model import AllocationResult, DeviceRequestAllocationResult

GPU = "gpu.example.com"
SHARE = "5f2a1c3e-0000-4000-8000-000000000001"
ALLOCATION = AllocationResult(
    results=(
        DeviceRequestAllocationResult("gpu", GPU, "node-1", "gpu-0"),
        DeviceRequestAllocationResult("gpu", GPU, "node-1", "gpu-1", share_id=SHARE),
    )
)
READY = {
    "type": "Ready",
    "status": "True",
    "reason": "Configured",
    "lastTransitionTime": "2026-07-24T10:00:00Z",
}
GOOD: dict[str, Any] = {
    "driver": GPU,
    "pool": "node-1",
    "device": "gpu-0",
    "conditions": [READY],
    "data": {"model": "A100", "serial": 7},
    "networkData": {
        "interfaceName": "eth1",
        "ips": ["10.0.0.5/24", "2001:db8::5/64"],
        "hardwareAddress": "aa:bb",
    },
}
REASON_RULE = (
    "a condition reason must start with alphabetic character, optionally followed by a string of "
    "alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' (e.g. 'my_name',  "
    "or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is "
    "'[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')"
)
SUBDOMAIN_RULE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
UNALLOCATED = "must be an allocated device in the claim"
QUALIFIED_RULE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
CIDR_RULE = "must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64)"
D0 = "status.devices[0]"


def entry(**changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(GOOD)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def condition(**changes: Any) -> dict[str, Any]:
    return {**READY, **changes}


def messages(*entries: dict[str, Any]) -> list[str]:
    return [str(e) for e in validate_device_statuses(read_device_statuses(list(entries)), ALLOCATION)]


def test_a_good_entry_and_a_share_are_taken_and_read_back_as_written() -> None:
    share = entry(device="gpu-1", shareID=SHARE, conditions=None, data=None, networkData=None)
    assert messages(entry(), share) == []
    entries = read_device_statuses([entry(), share])
    assert device_statuses_json(entries) == [
        {**GOOD, "conditions": [{**READY, "message": ""}]},
        # No conditions: null, as Go writes a nil list without omitempty.
        {"driver": GPU, "pool": "node-1", "device": "gpu-1", "shareID": SHARE, "conditions": None},
    ]
    assert read_device_statuses(device_statuses_json(entries)) == entries


def test_a_time_is_kept_as_metav1_time_writes_it_in_utc_to_the_second() -> None:
    [read] = read_device_statuses(
        [entry(conditions=[condition(lastTransitionTime="2026-07-24T12:00:00.5+02:00")])]
    )
    assert read.conditions[0].last_transition_time == "2026-07-24T10:00:00Z"


BAD: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "a device the claim was not allocated",
        entry(device="gpu-7"),
        [f"{D0}: Invalid value: {GPU}/node-1/gpu-7: {UNALLOCATED}"],
    ),
    (
        "a share the claim was not allocated (the device without its share)",
        entry(device="gpu-1"),
        [f"{D0}: Invalid value: {GPU}/node-1/gpu-1: {UNALLOCATED}"],
    ),
    (
        "an empty driver and pool",
        entry(driver="", pool=""),
        [
            f"{D0}.driver: Required value",
            f'{D0}.driver: Invalid value: "": {SUBDOMAIN_RULE}',
            f"{D0}.pool: Required value",
            f"{D0}: Invalid value: //gpu-0: {UNALLOCATED}",
        ],
    ),
    (
        "a device name with a dot",
        entry(device="gpu.0"),
        [
            f'{D0}.device: Invalid value: "gpu.0": must not contain dots',
            f"{D0}: Invalid value: {GPU}/node-1/gpu.0: {UNALLOCATED}",
        ],
    ),
    (
        "a share ID that is no UUID, and one not in normalized form",
        entry(device="gpu-1", shareID="share-1"),
        [
            f'{D0}.shareID: Invalid value: "share-1": error validating uid: invalid UUID length: 7',
            f"{D0}: Invalid value: {GPU}/node-1/gpu-1/share-1: {UNALLOCATED}",
        ],
    ),
    (
        "a share ID in upper case",
        entry(device="gpu-1", shareID=SHARE.upper()),
        [
            f'{D0}.shareID: Invalid value: "{SHARE.upper()}": uid must be in RFC 4122 normalized form, '
            "`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters",
            f"{D0}: Invalid value: {GPU}/node-1/gpu-1/{SHARE.upper()}: {UNALLOCATED}",
        ],
    ),
    (
        "a condition status that is not True, False or Unknown",
        entry(conditions=[READY, condition(type="Healthy", status="Maybe")]),
        [
            f'{D0}.conditions[1].status: Unsupported value: "Maybe": '
            'supported values: "False", "True", "Unknown"'
        ],
    ),
    (
        "a condition type that is no qualified name, twice",
        entry(conditions=[condition(type="not ready"), condition(type="not ready")]),
        [
            f'{D0}.conditions[0].type: Invalid value: "not ready": {QUALIFIED_RULE}',
            f'{D0}.conditions[1].type: Duplicate value: "not ready"',
            f'{D0}.conditions[1].type: Invalid value: "not ready": {QUALIFIED_RULE}',
        ],
    ),
    (
        "a condition without reason and time, a negative generation",
        entry(conditions=[{"type": "Ready", "status": "True", "observedGeneration": -1}]),
        [
            f"{D0}.conditions[0].observedGeneration: Invalid value: -1: "
            "must be greater than or equal to zero",
            f"{D0}.conditions[0].lastTransitionTime: Required value: must be set",
            f"{D0}.conditions[0].reason: Required value: must be set",
        ],
    ),
    (
        "a reason that is not CamelCase-like, a message over 32 KiB",
        entry(conditions=[condition(reason="not configured", message="m" * (32 * 1024 + 1))]),
        [
            f'{D0}.conditions[0].reason: Invalid value: "not configured": {REASON_RULE}',
            f"{D0}.conditions[0].message: Too long: may not be more than 32768 bytes",
        ],
    ),
    (
        "nine conditions",
        entry(conditions=[condition(type=f"C{i}") for i in range(9)]),
        [f"{D0}.conditions: Too many: 9: must have at most 8 items"],
    ),
    (
        "data that is not an object",
        entry(data=["a", "b"]),
        [f'{D0}.data: Invalid value: "<value omitted>": must be a valid JSON object'],
    ),
    (
        "data over 10 KiB",
        entry(data={"blob": "x" * 10240}),
        [f"{D0}.data: Too long: may not be more than 10240 bytes"],
    ),
    (
        "an interface name over 256 bytes and a hardware address over 128",
        entry(networkData={"interfaceName": "é" * 129, "hardwareAddress": "a" * 129}),
        [
            f"{D0}.networkData.interfaceName: Too long: may not be more than 256 bytes",
            f"{D0}.networkData.hardwareAddress: Too long: may not be more than 128 bytes",
        ],
    ),
    (
        "IPs: no prefix, not canonical, repeated",
        entry(networkData={"ips": ["10.0.0.5", "2001:DB8::5/64", "10.0.0.6/24", "10.0.0.6/24"]}),
        [
            f'{D0}.networkData.ips[0]: Invalid value: "10.0.0.5": {CIDR_RULE}',
            f'{D0}.networkData.ips[1]: Invalid value: "2001:DB8::5/64": must be in canonical form '
            '("2001:db8::5/64")',
            f'{D0}.networkData.ips[3]: Duplicate value: "10.0.0.6/24"',
        ],
    ),
    (
        "seventeen IPs",
        entry(networkData={"ips": [f"10.0.0.{i}/24" for i in range(17)]}),
        [f"{D0}.networkData.ips: Too many: 17: must have at most 16 items"],
    ),
]


@pytest.mark.parametrize(("entry_json", "expected"), [(e, m) for _, e, m in BAD], ids=[d for d, _, _ in BAD])
def test_a_bad_entry_is_refused_in_the_api_servers_words(
    entry_json: dict[str, Any], expected: list[str]
) -> None:
    assert messages(entry_json) == expected


def test_an_entry_given_twice_is_a_duplicate_of_its_device() -> None:
    assert messages(entry(), entry(conditions=None)) == [
        f"status.devices[1]: Duplicate value: {GPU}/node-1/gpu-0"
    ]


@pytest.mark.parametrize(
    ("value", "problems"),
    [
        ({"devices": 1}, ["status.devices: cannot decode a number as a list"]),
        (
            [{"driver": 5, "conditions": "Ready"}],
            [
                f"{D0}.driver: cannot decode a number as a string",
                f"{D0}.conditions: cannot decode a string as a list",
            ],
        ),
        ([{**GOOD, "colour": "red"}], [f'unknown field "{D0}.colour"']),
        (
            [entry(conditions=[condition(lastTransitionTime="yesterday")])],
            [
                f'{D0}.conditions[0].lastTransitionTime: "yesterday" is not an RFC 3339 time such as '
                '"2026-07-24T10:00:00Z"'
            ],
        ),
        (
            [entry(conditions=[condition(observedGeneration=1.5)])],
            [f"{D0}.conditions[0].observedGeneration: cannot decode a number as an integer"],
        ),
        (
            [entry(networkData={"ips": "10.0.0.5/24"})],
            [f"{D0}.networkData.ips: cannot decode a string as a list"],
        ),
    ],
)
def test_a_value_of_the_wrong_shape_is_named_by_its_path(value: Any, problems: list[str]) -> None:
    with pytest.raises(StatusDecodeError) as caught:
        read_device_statuses(value["devices"] if isinstance(value, dict) else value)
    assert list(caught.value.problems) == problems


def test_a_devices_conditions_are_found_by_driver_pool_device_and_share() -> None:
    entries = read_device_statuses(
        [
            entry(),
            entry(device="gpu-1", shareID=SHARE, conditions=[condition(type="Attached", status="False")]),
        ]
    )
    assert device_conditions(entries, GPU, "node-1", "gpu-0") == (
        DeviceCondition("Ready", "True", "2026-07-24T10:00:00Z", "Configured"),
    )
    assert [c.type for c in device_conditions(entries, GPU, "node-1", "gpu-1", SHARE)] == ["Attached"]
    assert device_conditions(entries, GPU, "node-1", "gpu-1") == ()
    assert device_conditions(entries, "other.example.com", "node-1", "gpu-0") == ()
