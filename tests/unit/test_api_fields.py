"""Every message of the wire API against the published .proto field tables: a wrong number never ships."""

from __future__ import annotations

from google.protobuf.descriptor import Descriptor, FieldDescriptor, FileDescriptor

from kubedevice.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubedevice.api.dra.v1 import api_pb2 as dra_v1
from kubedevice.api.dra.v1beta1 import api_pb2 as dra_v1beta1
from kubedevice.api.drahealth.v1 import api_pb2 as health_v1
from kubedevice.api.drahealth.v1alpha1 import api_pb2 as health_v1alpha1
from kubedevice.api.pluginregistration.v1 import api_pb2 as reg
from kubedevice.api.podresources.v1 import api_pb2 as pr

# message full name -> {field name: (number, type)}; type is a scalar name, a message or enum full name,
# "repeated <type>" or "map<string,<type>>".


def _dra_fields(p: str, *, share_id: bool) -> dict[str, dict[str, tuple[int, str]]]:
    """The DRAPlugin messages of one generation; they differ only in Device.share_id (v1)."""
    device = {
        "request_names": (1, "repeated string"),
        "pool_name": (2, "string"),
        "device_name": (3, "string"),
        "cdi_device_ids": (4, "repeated string"),
    }
    if share_id:
        device["share_id"] = (5, "string")
    return {
        f"{p}.NodePrepareResourcesRequest": {"claims": (1, f"repeated {p}.Claim")},
        f"{p}.NodePrepareResourcesResponse": {"claims": (1, f"map<string,{p}.NodePrepareResourceResponse>")},
        f"{p}.NodePrepareResourceResponse": {"devices": (1, f"repeated {p}.Device"), "error": (2, "string")},
        f"{p}.Device": device,
        f"{p}.NodeUnprepareResourcesRequest": {"claims": (1, f"repeated {p}.Claim")},
        f"{p}.NodeUnprepareResourcesResponse": {
            "claims": (1, f"map<string,{p}.NodeUnprepareResourceResponse>")
        },
        f"{p}.NodeUnprepareResourceResponse": {"error": (1, "string")},
        f"{p}.Claim": {"namespace": (1, "string"), "uid": (2, "string"), "name": (3, "string")},
    }


def _health_fields(p: str) -> dict[str, dict[str, tuple[int, str]]]:
    return {
        f"{p}.NodeWatchResourcesRequest": {},
        f"{p}.NodeWatchResourcesResponse": {"devices": (1, f"repeated {p}.DeviceHealth")},
        f"{p}.DeviceHealth": {
            "device": (1, f"{p}.DeviceIdentifier"),
            "health": (2, f"{p}.HealthStatus"),
            "last_updated_time": (3, "int64"),
            "health_check_timeout_seconds": (4, "int64"),
            "message": (5, "string"),
        },
        f"{p}.DeviceIdentifier": {"pool_name": (1, "string"), "device_name": (2, "string")},
    }


SPEC_FIELDS: dict[str, dict[str, tuple[int, str]]] = {
    # device plugin API v1beta1
    "v1beta1.DevicePluginOptions": {
        "pre_start_required": (1, "bool"),
        "get_preferred_allocation_available": (2, "bool"),
    },
    "v1beta1.RegisterRequest": {
        "version": (1, "string"),
        "endpoint": (2, "string"),
        "resource_name": (3, "string"),
        "options": (4, "v1beta1.DevicePluginOptions"),
    },
    "v1beta1.Empty": {},
    "v1beta1.ListAndWatchResponse": {"devices": (1, "repeated v1beta1.Device")},
    "v1beta1.TopologyInfo": {"nodes": (1, "repeated v1beta1.NUMANode")},
    "v1beta1.NUMANode": {"ID": (1, "int64")},
    "v1beta1.Device": {"ID": (1, "string"), "health": (2, "string"), "topology": (3, "v1beta1.TopologyInfo")},
    "v1beta1.PreStartContainerRequest": {"devices_ids": (1, "repeated string")},
    "v1beta1.PreStartContainerResponse": {},
    "v1beta1.PreferredAllocationRequest": {
        "container_requests": (1, "repeated v1beta1.ContainerPreferredAllocationRequest")
    },
    "v1beta1.ContainerPreferredAllocationRequest": {
        "available_deviceIDs": (1, "repeated string"),
        "must_include_deviceIDs": (2, "repeated string"),
        "allocation_size": (3, "int32"),
    },
    "v1beta1.PreferredAllocationResponse": {
        "container_responses": (1, "repeated v1beta1.ContainerPreferredAllocationResponse")
    },
    "v1beta1.ContainerPreferredAllocationResponse": {"deviceIDs": (1, "repeated string")},
    "v1beta1.AllocateRequest": {"container_requests": (1, "repeated v1beta1.ContainerAllocateRequest")},
    "v1beta1.ContainerAllocateRequest": {"devices_ids": (1, "repeated string")},
    "v1beta1.AllocateResponse": {"container_responses": (1, "repeated v1beta1.ContainerAllocateResponse")},
    "v1beta1.ContainerAllocateResponse": {
        "envs": (1, "map<string,string>"),
        "mounts": (2, "repeated v1beta1.Mount"),
        "devices": (3, "repeated v1beta1.DeviceSpec"),
        "annotations": (4, "map<string,string>"),
        "cdi_devices": (5, "repeated v1beta1.CDIDevice"),
    },
    "v1beta1.Mount": {"container_path": (1, "string"), "host_path": (2, "string"), "read_only": (3, "bool")},
    "v1beta1.DeviceSpec": {
        "container_path": (1, "string"),
        "host_path": (2, "string"),
        "permissions": (3, "string"),
    },
    "v1beta1.CDIDevice": {"name": (1, "string")},
    # plugin-watcher registration
    "pluginregistration.PluginInfo": {
        "type": (1, "string"),
        "name": (2, "string"),
        "endpoint": (3, "string"),
        "supported_versions": (4, "repeated string"),
    },
    "pluginregistration.RegistrationStatus": {"plugin_registered": (1, "bool"), "error": (2, "string")},
    "pluginregistration.RegistrationStatusResponse": {},
    "pluginregistration.InfoRequest": {},
    # PodResources v1
    "v1.AllocatableResourcesRequest": {},
    "v1.ListPodResourcesRequest": {},
    "v1.AllocatableResourcesResponse": {
        "devices": (1, "repeated v1.ContainerDevices"),
        "cpu_ids": (2, "repeated int64"),
        "memory": (3, "repeated v1.ContainerMemory"),
    },
    "v1.ListPodResourcesResponse": {"pod_resources": (1, "repeated v1.PodResources")},
    "v1.PodResources": {
        "name": (1, "string"),
        "namespace": (2, "string"),
        "containers": (3, "repeated v1.ContainerResources"),
        "cpu_ids": (4, "repeated int64"),
        "memory": (5, "repeated v1.ContainerMemory"),
    },
    "v1.ContainerResources": {
        "name": (1, "string"),
        "devices": (2, "repeated v1.ContainerDevices"),
        "cpu_ids": (3, "repeated int64"),
        "memory": (4, "repeated v1.ContainerMemory"),
        "dynamic_resources": (5, "repeated v1.DynamicResource"),
    },
    "v1.ContainerMemory": {
        "memory_type": (1, "string"),
        "size": (2, "uint64"),
        "topology": (3, "v1.TopologyInfo"),
    },
    "v1.ContainerDevices": {
        "resource_name": (1, "string"),
        "device_ids": (2, "repeated string"),
        "topology": (3, "v1.TopologyInfo"),
    },
    "v1.TopologyInfo": {"nodes": (1, "repeated v1.NUMANode")},
    "v1.NUMANode": {"ID": (1, "int64")},
    "v1.DynamicResource": {
        "claim_name": (2, "string"),
        "claim_namespace": (3, "string"),
        "claim_resources": (4, "repeated v1.ClaimResource"),
    },
    "v1.ClaimResource": {
        "cdi_devices": (1, "repeated v1.CDIDevice"),
        "driver_name": (2, "string"),
        "pool_name": (3, "string"),
        "device_name": (4, "string"),
        "share_id": (5, "string"),
    },
    "v1.CDIDevice": {"name": (1, "string")},
    "v1.GetPodResourcesRequest": {"pod_name": (1, "string"), "pod_namespace": (2, "string")},
    "v1.GetPodResourcesResponse": {"pod_resources": (1, "v1.PodResources")},
    **_dra_fields("k8s.io.kubelet.pkg.apis.dra.v1", share_id=True),
    **_dra_fields("k8s.io.kubelet.pkg.apis.dra.v1beta1", share_id=False),
    **_health_fields("v1"),
    **_health_fields("v1alpha1"),
}

SPEC_SERVICES: dict[str, dict[str, tuple[str, str, bool]]] = {
    "v1beta1.Registration": {"Register": ("v1beta1.RegisterRequest", "v1beta1.Empty", False)},
    "v1beta1.DevicePlugin": {
        "GetDevicePluginOptions": ("v1beta1.Empty", "v1beta1.DevicePluginOptions", False),
        "ListAndWatch": ("v1beta1.Empty", "v1beta1.ListAndWatchResponse", True),
        "GetPreferredAllocation": (
            "v1beta1.PreferredAllocationRequest",
            "v1beta1.PreferredAllocationResponse",
            False,
        ),
        "Allocate": ("v1beta1.AllocateRequest", "v1beta1.AllocateResponse", False),
        "PreStartContainer": ("v1beta1.PreStartContainerRequest", "v1beta1.PreStartContainerResponse", False),
    },
    "pluginregistration.Registration": {
        "GetInfo": ("pluginregistration.InfoRequest", "pluginregistration.PluginInfo", False),
        "NotifyRegistrationStatus": (
            "pluginregistration.RegistrationStatus",
            "pluginregistration.RegistrationStatusResponse",
            False,
        ),
    },
    "v1.PodResourcesLister": {
        "List": ("v1.ListPodResourcesRequest", "v1.ListPodResourcesResponse", False),
        "GetAllocatableResources": (
            "v1.AllocatableResourcesRequest",
            "v1.AllocatableResourcesResponse",
            False,
        ),
        "Get": ("v1.GetPodResourcesRequest", "v1.GetPodResourcesResponse", False),
    },
    **{
        f"k8s.io.kubelet.pkg.apis.dra.{v}.DRAPlugin": {
            "NodePrepareResources": (
                f"k8s.io.kubelet.pkg.apis.dra.{v}.NodePrepareResourcesRequest",
                f"k8s.io.kubelet.pkg.apis.dra.{v}.NodePrepareResourcesResponse",
                False,
            ),
            "NodeUnprepareResources": (
                f"k8s.io.kubelet.pkg.apis.dra.{v}.NodeUnprepareResourcesRequest",
                f"k8s.io.kubelet.pkg.apis.dra.{v}.NodeUnprepareResourcesResponse",
                False,
            ),
        }
        for v in ("v1", "v1beta1")
    },
    **{
        f"{v}.DRAResourceHealth": {
            "NodeWatchResources": (f"{v}.NodeWatchResourcesRequest", f"{v}.NodeWatchResourcesResponse", True)
        }
        for v in ("v1", "v1alpha1")
    },
}

FILES: tuple[FileDescriptor, ...] = (
    dp.DESCRIPTOR,
    reg.DESCRIPTOR,
    pr.DESCRIPTOR,
    dra_v1.DESCRIPTOR,
    dra_v1beta1.DESCRIPTOR,
    health_v1.DESCRIPTOR,
    health_v1alpha1.DESCRIPTOR,
)

_SCALARS = {
    FieldDescriptor.TYPE_BOOL: "bool",
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_INT32: "int32",
    FieldDescriptor.TYPE_INT64: "int64",
    FieldDescriptor.TYPE_UINT64: "uint64",
}


def _base_type(field: FieldDescriptor) -> str:
    if field.message_type is not None:
        return str(field.message_type.full_name)
    if field.enum_type is not None:
        return str(field.enum_type.full_name)
    return _SCALARS[field.type]


def _type_of(field: FieldDescriptor) -> str:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        return f"map<{_SCALARS[key.type]},{_base_type(value)}>"
    base = _base_type(field)
    return f"repeated {base}" if field.is_repeated else base


def _messages(descriptors: dict[str, Descriptor]) -> dict[str, Descriptor]:
    found: dict[str, Descriptor] = {}
    for message in descriptors.values():
        if message.GetOptions().map_entry:
            continue
        found[message.full_name] = message
        found.update(_messages(message.nested_types_by_name))
    return found


def test_packages_are_the_wire_packages() -> None:
    assert [f.package for f in FILES] == [
        "v1beta1",
        "pluginregistration",
        "v1",
        "k8s.io.kubelet.pkg.apis.dra.v1",
        "k8s.io.kubelet.pkg.apis.dra.v1beta1",
        "v1",
        "v1alpha1",
    ]


def test_every_message_matches_the_spec_table() -> None:
    messages: dict[str, Descriptor] = {}
    for f in FILES:
        messages.update(_messages(dict(f.message_types_by_name)))
    assert sorted(messages) == sorted(SPEC_FIELDS), "messages differ from the published contracts"
    for name, expected in SPEC_FIELDS.items():
        actual = {f.name: (f.number, _type_of(f)) for f in messages[name].fields}
        assert actual == expected, f"{name} differs from the published contract"


def test_share_id_is_proto3_optional() -> None:
    field = pr.ClaimResource.DESCRIPTOR.fields_by_name["share_id"]
    assert field.has_presence
    assert not pr.ClaimResource().HasField("share_id")


def test_dra_device_share_id_is_v1_only_and_proto3_optional() -> None:
    field = dra_v1.Device.DESCRIPTOR.fields_by_name["share_id"]
    assert field.has_presence
    assert not dra_v1.Device().HasField("share_id")
    assert "share_id" not in dra_v1beta1.Device.DESCRIPTOR.fields_by_name


def test_dra_generations_are_byte_identical_without_share_id() -> None:
    # A v1beta1 peer reads a v1 message and skips field 5: the rest of the bytes mean the same.
    v1 = dra_v1.NodePrepareResourcesResponse()
    v1.claims["u1"].devices.add(
        request_names=["gpu"], pool_name="p", device_name="d", cdi_device_ids=["a/b=c"]
    )
    old = dra_v1beta1.NodePrepareResourcesResponse.FromString(v1.SerializeToString())
    assert old.SerializeToString() == v1.SerializeToString()
    v1.claims["u1"].devices[0].share_id = "s"
    skipped = dra_v1beta1.NodePrepareResourcesResponse.FromString(v1.SerializeToString())
    skipped.DiscardUnknownFields()
    assert skipped == old


def test_health_status_values() -> None:
    for module in (health_v1, health_v1alpha1):
        assert dict(module.HealthStatus.items()) == {"UNKNOWN": 0, "HEALTHY": 1, "UNHEALTHY": 2}


def test_dynamic_resource_field_one_is_reserved() -> None:
    assert 1 not in pr.DynamicResource.DESCRIPTOR.fields_by_number


def test_services_and_method_paths() -> None:
    services = {s.full_name: s for f in FILES for s in f.services_by_name.values()}
    assert sorted(services) == sorted(SPEC_SERVICES)
    for name, methods in SPEC_SERVICES.items():
        actual = {
            m.name: (m.input_type.full_name, m.output_type.full_name, m.server_streaming)
            for m in services[name].methods
        }
        assert actual == methods, name
        assert not any(m.client_streaming for m in services[name].methods)
