"""The DRA checkpoint's test vectors: inner documents (the ``Data`` string) with their CRC-32 checksums.

C1 is a real kubelet file; C5 and its two variants are the upstream unit-test data as stored (the v1.31
``Entries`` form); C3/C4 are the same contents in the ``ClaimInfoStateList`` form; C6-C9 are derived or ours.
The files are built here with Python's json module, independently of the code under test.
"""

from __future__ import annotations

import json

HEAD = '{"kind":"DRACheckpoint","apiVersion":"checkpoint.dra.kubelet.k8s.io/v1","ClaimInfoStateList":'
C3_CLAIM = (
    '{"ClaimUID":"067798be-454e-4be4-9047-1aa06aea63f7","ClaimName":"example","Namespace":"default",'
    '"PodUIDs":{"139cdb46-f989-4f17-9561-ca10cfb509a6":{}},"DriverState":{"test-driver.cdi.k8s.io":'
    '{"Devices":[{"PoolName":"worker-1","DeviceName":"dev-1","RequestNames":["test request"],'
    '"CDIDeviceIDs":["example.com/example=cdi-example"]}]}}}'
)
C4_CLAIMS = (
    '{"ClaimUID":"067798be-454e-4be4-9047-1aa06aea63f7","ClaimName":"example-1","Namespace":"default",'
    '"PodUIDs":{"139cdb46-f989-4f17-9561-ca10cfb509a6":{}},"DriverState":{"test-driver.cdi.k8s.io":'
    '{"Devices":[{"PoolName":"worker-1","DeviceName":"dev-1","RequestNames":["test request"],'
    '"CDIDeviceIDs":["example.com/example=cdi-example"]}]}}},'
    '{"ClaimUID":"4cf8db2d-06c0-7d70-1a51-e59b25b2c16c","ClaimName":"example-2","Namespace":"default",'
    '"PodUIDs":{"139cdb46-f989-4f17-9561-ca10cfb509a6":{}},"DriverState":{"test-driver.cdi.k8s.io":'
    '{"Devices":[{"PoolName":"worker-1","DeviceName":"dev-2","RequestNames":null,"CDIDeviceIDs":null}]}}}'
)
C3 = HEAD + "[" + C3_CLAIM + "]}"
C4 = HEAD + "[" + C4_CLAIMS + "]}"
C7 = HEAD + (
    '[{"ClaimUID":"a1b2c3d4-0000-4000-8000-000000000001","ClaimName":"shared-gpu","Namespace":"ml",'
    '"PodUIDs":{"pod-a":{},"pod-b":{}},"DriverState":{"gpu.example.com":{"Devices":['
    '{"PoolName":"node-1","DeviceName":"gpu-0","RequestNames":["gpu"],'
    '"CDIDeviceIDs":["gpu.example.com/gpu=gpu-0"]},'
    '{"PoolName":"node-1","DeviceName":"gpu-1","RequestNames":["gpu"],'
    '"CDIDeviceIDs":["gpu.example.com/gpu=gpu-1","gpu.example.com/gpu=common"]}]},'
    '"nic.example.com":{"Devices":null}}}]}'
)
C8 = HEAD + (
    '[{"ClaimUID":"5d6c8a0e-2f4b-4c1d-9e7a-0b1c2d3e4f50","ClaimName":"cap\\u003cshare\\u003e\\u0026",'
    '"Namespace":"default","PodUIDs":{"p1":{}},"DriverState":{"nic.example.com":{"Devices":['
    '{"PoolName":"node-1","DeviceName":"eth1","ShareID":"0f2d4c6e-8a0b-4c2d-9e1f-3a5b7c9d1e2f",'
    '"RequestNames":null,"CDIDeviceIDs":["nic.example.com/vf=eth1-3"]}]}}}]}'
)


def entries_form(inner: str) -> str:
    """The v1.31 form of a document: the list key is ``Entries``."""
    return inner.replace('"ClaimInfoStateList"', '"Entries"')


#: name -> (the Data string, verbatim; its Checksum).
VECTORS: dict[str, tuple[str, int]] = {
    "C1": (HEAD + "[]}", 2361995144),
    "C2": (HEAD + "null}", 4010664294),
    "C3": (C3, 1656016162),
    "C4": (C4, 1582256999),
    "C5": (entries_form(C3), 1597924435),
    "C5-C4": (entries_form(C4), 3633532417),
    "C5-dup": (
        entries_form(C3).replace(
            "]}}}]}",
            ',{"PoolName":"worker-1","DeviceName":"dev-2","RequestNames":["test request"],'
            '"CDIDeviceIDs":["example.com/example=cdi-example"]}]}}}]}',
        ),
        1812303514,
    ),
    "C6": (C3.replace('"DeviceName":"dev-1",', '"DeviceName":"dev-1","ShareID":null,'), 2570581864),
    "C7": (C7, 2697487707),
    "C8": (C8, 2085975979),
    "C9": (
        '{\n "kind": "DRACheckpoint",\n "apiVersion": "checkpoint.dra.kubelet.k8s.io/v1",\n'
        ' "ClaimInfoStateList": []\n}',
        3787273155,
    ),
}


def whole_file(inner: str, checksum: int) -> bytes:
    """The file Go's json.Marshal writes for this Data string (no whitespace, no newline)."""
    return ('{"Data":' + json.dumps(inner, ensure_ascii=False) + f',"Checksum":{checksum}}}').encode()


def vector_file(name: str) -> bytes:
    return whole_file(*VECTORS[name])
