"""CDI (Container Device Interface) spec files for device plugins: build, check, write, remove, look up.

A plugin that answers Allocate with CDI device names needs a spec defining them in a folder the runtime
reads. Build it from dataclasses (checked with the CDI rules when built), and either let the SDK own it —
override `DevicePlugin.cdi_spec(devices)`, and the server writes it before registering, rewrites it when
the device list changes and removes it on stop — or write it yourself with `write_spec`/`remove_spec`.
Allocate answers name devices with `spec.qualified_name(device)` (``vendor/class=name``).
"""

from kubedevice.cdi_names import (
    CLASS_NAME,
    DEVICE_NAME,
    VENDOR_NAME,
    CDIError,
    parse_qualified_name,
    validate_device_name,
    validate_kind,
)
from kubedevice.plugin.cdi.files import (
    DEFAULT_SPEC_DIR,
    DEFAULT_SPEC_DIRS,
    SpecScan,
    check_spec_dir,
    defined_devices,
    read_spec,
    remove_spec,
    scan_spec_dirs,
    spec_from_json,
    write_spec,
)
from kubedevice.plugin.cdi.spec import (
    CDI_VERSIONS,
    CDIDevice,
    CDISpec,
    ContainerEdits,
    DeviceNode,
    Hook,
    Mount,
)

__all__ = [
    "CDI_VERSIONS",
    "CLASS_NAME",
    "DEFAULT_SPEC_DIR",
    "DEFAULT_SPEC_DIRS",
    "DEVICE_NAME",
    "VENDOR_NAME",
    "CDIDevice",
    "CDIError",
    "CDISpec",
    "ContainerEdits",
    "DeviceNode",
    "Hook",
    "Mount",
    "SpecScan",
    "check_spec_dir",
    "defined_devices",
    "parse_qualified_name",
    "read_spec",
    "remove_spec",
    "scan_spec_dirs",
    "spec_from_json",
    "validate_device_name",
    "validate_kind",
    "write_spec",
]
