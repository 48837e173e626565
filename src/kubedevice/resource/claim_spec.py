"""A claim's `spec.devices` in any supported version, read into the v1 shape and checked.

v1 and v1beta2 write a request as `{name, exactly: {...}}` or `{name, firstAvailable: [...]}`; v1beta1
writes the exact request's fields on the request itself. Each version is read in place (not rewritten
first), so an error names the field as the user wrote it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubedevice.resource.capacity import CapacityRequirements
from kubedevice.resource.capacity_reader import read_capacity_requirements
from kubedevice.resource.fields import Fields, is_qualified_attribute
from kubedevice.resource.model import (
    AllocationMode,
    DeviceClaimConfiguration,
    DeviceConstraint,
    DeviceRequest,
    DeviceSubRequest,
    ExactDeviceRequest,
    OpaqueConfig,
    ResourceClaimSpec,
    SelectorCompileError,
    SelectorCompiler,
)
from kubedevice.resource.taint_reader import read_tolerations
from kubedevice.resource.taints import DeviceToleration

#: The API's limits (resource.k8s.io): requests and constraints per claim, selectors per request,
#: subrequests per request, configuration entries per claim or class.
MAX_REQUESTS = 32
MAX_CONSTRAINTS = 32
MAX_SELECTORS = 32
MAX_SUBREQUESTS = 8
MAX_CONFIGS = 32
_MODES: tuple[AllocationMode, ...] = ("ExactCount", "All")


class SpecReader:
    """Reads claim specs and class fields of one document; `compiler` checks every CEL selector."""

    def __init__(self, fields: Fields, version: str, compiler: SelectorCompiler | None) -> None:
        self.f = fields
        self.flat_requests = version == "v1beta1"
        self.compiler = compiler

    def claim_spec(self, value: Any, path: str) -> ResourceClaimSpec:
        spec = self.f.mapping(value, path)
        devices = self.f.mapping(spec.get("devices"), f"{path}.devices")
        at = f"{path}.devices"
        raw_requests = self.f.items(devices.get("requests"), f"{at}.requests", at_most=MAX_REQUESTS)
        requests = tuple(self._request(r, f"{at}.requests[{i}]") for i, r in enumerate(raw_requests))
        seen: set[str] = set()
        for i, r in enumerate(requests):
            if r.name in seen:
                raise self.f.error(f"{at}.requests[{i}].name", f"{r.name!r} is used by another request")
            seen.add(r.name)
        known = _request_names(requests)
        raw_constraints = self.f.items(
            devices.get("constraints"), f"{at}.constraints", at_most=MAX_CONSTRAINTS
        )
        constraints = tuple(
            self._constraint(c, f"{at}.constraints[{i}]", known) for i, c in enumerate(raw_constraints)
        )
        config = self.configs(devices.get("config"), f"{at}.config", known)
        return ResourceClaimSpec(requests, constraints, config)

    def selectors(self, value: Any, path: str) -> tuple[str, ...]:
        out: list[str] = []
        for i, raw in enumerate(self.f.items(value, path, at_most=MAX_SELECTORS)):
            at = f"{path}[{i}]"
            cel = self.f.mapping(self.f.mapping(raw, at).get("cel"), f"{at}.cel")
            expression = self.f.string(cel.get("expression"), f"{at}.cel.expression", required=True)
            if self.compiler is not None:
                try:
                    self.compiler.compile(expression)
                except SelectorCompileError as err:
                    message = " ".join(err.message.split())
                    raise self.f.error(f"{at}.cel.expression", f"CEL compile error: {message}") from None
            out.append(expression)
        return tuple(out)

    def configs(
        self, value: Any, path: str, known: frozenset[str] | None
    ) -> tuple[DeviceClaimConfiguration, ...]:
        """`config[]` of a claim (`known`: its request names) or of a class (None: no `requests`)."""
        out: list[DeviceClaimConfiguration] = []
        for i, raw in enumerate(self.f.items(value, path, at_most=MAX_CONFIGS)):
            at = f"{path}[{i}]"
            entry = self.f.mapping(raw, at)
            requests: tuple[str, ...] = ()
            if known is not None:
                requests = self._request_refs(entry.get("requests"), f"{at}.requests", known)
            opaque = self.opaque(entry.get("opaque"), f"{at}.opaque")
            out.append(DeviceClaimConfiguration(requests, opaque))
        return tuple(out)

    def opaque(self, value: Any, path: str) -> OpaqueConfig | None:
        if value is None:
            return None
        opaque = self.f.mapping(value, path)
        driver = self.f.dns_subdomain(opaque.get("driver"), f"{path}.driver")
        if opaque.get("parameters") is None:
            raise self.f.error(f"{path}.parameters", "is required")
        return OpaqueConfig(driver, opaque["parameters"])

    def _request(self, raw: Any, path: str) -> DeviceRequest:
        request = self.f.mapping(raw, path)
        name = self.f.dns_label(request.get("name"), f"{path}.name")
        first = request.get("firstAvailable")
        if self.flat_requests:
            if first is not None and request.get("deviceClassName"):
                raise self.f.error(path, "deviceClassName and firstAvailable cannot both be set")
            if first is None:
                return DeviceRequest(name, exactly=self._exact(request, path))
        else:
            exactly = request.get("exactly")
            if (exactly is None) == (first is None):
                raise self.f.error(path, "exactly one of exactly or firstAvailable must be set")
            if exactly is not None:
                return DeviceRequest(
                    name, exactly=self._exact(self.f.mapping(exactly, f"{path}.exactly"), f"{path}.exactly")
                )
        at = f"{path}.firstAvailable"
        raw_subs = self.f.items(first, at, at_most=MAX_SUBREQUESTS)
        if not raw_subs:
            raise self.f.error(at, "must list at least one subrequest")
        subs = tuple(self._subrequest(s, f"{at}[{i}]") for i, s in enumerate(raw_subs))
        names = [s.name for s in subs]
        for i, sub_name in enumerate(names):
            if sub_name in names[:i]:
                raise self.f.error(f"{at}[{i}].name", f"{sub_name!r} is used by another subrequest")
        return DeviceRequest(name, first_available=subs)

    def _exact(self, raw: Mapping[str, Any], path: str) -> ExactDeviceRequest:
        mode, count = self._mode_and_count(raw, path)
        return ExactDeviceRequest(
            device_class_name=self.f.dns_subdomain(raw.get("deviceClassName"), f"{path}.deviceClassName"),
            selectors=self.selectors(raw.get("selectors"), f"{path}.selectors"),
            allocation_mode=mode,
            count=count,
            admin_access=self.f.boolean(raw.get("adminAccess"), f"{path}.adminAccess"),
            tolerations=self._tolerations(raw.get("tolerations"), f"{path}.tolerations"),
            capacity=self._capacity(raw.get("capacity"), f"{path}.capacity"),
        )

    def _subrequest(self, raw: Any, path: str) -> DeviceSubRequest:
        sub = self.f.mapping(raw, path)
        if sub.get("adminAccess") is not None:
            raise self.f.error(f"{path}.adminAccess", "is not allowed in a subrequest")
        mode, count = self._mode_and_count(sub, path)
        return DeviceSubRequest(
            name=self.f.dns_label(sub.get("name"), f"{path}.name"),
            device_class_name=self.f.dns_subdomain(sub.get("deviceClassName"), f"{path}.deviceClassName"),
            selectors=self.selectors(sub.get("selectors"), f"{path}.selectors"),
            allocation_mode=mode,
            count=count,
            tolerations=self._tolerations(sub.get("tolerations"), f"{path}.tolerations"),
            capacity=self._capacity(sub.get("capacity"), f"{path}.capacity"),
        )

    def _mode_and_count(self, raw: Mapping[str, Any], path: str) -> tuple[AllocationMode, int]:
        mode = self.f.string(raw.get("allocationMode"), f"{path}.allocationMode") or "ExactCount"
        if mode not in _MODES:
            raise self.f.error(f"{path}.allocationMode", f"{mode!r} is not ExactCount or All")
        if mode == "All":
            if raw.get("count") is not None:
                raise self.f.error(f"{path}.count", "must not be set when allocationMode is All")
            return "All", 0
        count = self.f.integer(raw.get("count"), f"{path}.count", 1)
        if count < 1:
            raise self.f.error(f"{path}.count", f"must be at least 1, not {count}")
        return "ExactCount", count

    def _tolerations(self, value: Any, path: str) -> tuple[DeviceToleration, ...]:
        return read_tolerations(self.f, value, path)

    def _capacity(self, value: Any, path: str) -> CapacityRequirements | None:
        return None if value is None else read_capacity_requirements(self.f, value, path)

    def _constraint(self, raw: Any, path: str, known: frozenset[str]) -> DeviceConstraint:
        constraint = self.f.mapping(raw, path)
        requests = self._request_refs(constraint.get("requests"), f"{path}.requests", known)
        match = self.f.string(constraint.get("matchAttribute"), f"{path}.matchAttribute") or None
        distinct = self.f.string(constraint.get("distinctAttribute"), f"{path}.distinctAttribute") or None
        if (match is None) == (distinct is None):
            raise self.f.error(path, "exactly one of matchAttribute or distinctAttribute must be set")
        field = "matchAttribute" if match is not None else "distinctAttribute"
        name = match or distinct or ""
        if not is_qualified_attribute(name, domain_required=True):
            raise self.f.error(
                f"{path}.{field}", f"{name!r} is not a fully qualified attribute (<domain>/<name>)"
            )
        return DeviceConstraint(requests, match, distinct)

    def _request_refs(self, value: Any, path: str, known: frozenset[str]) -> tuple[str, ...]:
        out: list[str] = []
        for i, raw in enumerate(self.f.items(value, path)):
            ref = self.f.string(raw, f"{path}[{i}]", required=True)
            if ref not in known:
                raise self.f.error(f"{path}[{i}]", f"no request named {ref!r}")
            out.append(ref)
        return tuple(out)


def _request_names(requests: tuple[DeviceRequest, ...]) -> frozenset[str]:
    """What `requests` lists may name: a request, or `<request>/<subrequest>`."""
    names = {r.name for r in requests}
    names.update(f"{r.name}/{s.name}" for r in requests for s in r.first_available)
    return frozenset(names)
