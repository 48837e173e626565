"""What the allocator writes besides the devices: the claim's `status.allocation.devices.config`."""

from __future__ import annotations

from kubedevice.resource.model import DeviceAllocationConfiguration, OpaqueConfig, ResourceClaimSpec
from kubedevice.scheduler.search import RequestData, Search


def chosen_request(search: Search, c: int, r: int) -> RequestData:
    """The request's data, or for a `firstAvailable` request the subrequest the search kept."""
    data = search.request_data[(c, r, 0)]
    if data.parent is not None:
        data = search.request_data[(c, r, search.selected_sub[(c, r)])]
    return data


def build_config(
    spec: ResourceClaimSpec, c: int, search: Search
) -> tuple[DeviceAllocationConfiguration, ...]:
    """`status.allocation.devices.config` as upstream builds it.

    First each used class's `spec.config` (once per class, naming the requests that use it), then the
    claim's own entries that apply to an allocated request or chosen subrequest; last, an entry naming
    every request of the claim gets its `requests` cleared (empty means all).
    """
    entries: list[tuple[str, list[str], OpaqueConfig | None]] = []
    class_entries: dict[str, range] = {}
    for r in range(len(spec.requests)):
        data = chosen_request(search, c, r)
        name = data.device_class.meta.name
        if name in class_entries:
            for i in class_entries[name]:
                entries[i][1].append(data.result_name)
            continue
        start = len(entries)
        for class_config in data.device_class.config:
            entries.append(("FromClass", [data.result_name], class_config.opaque))
        class_entries[name] = range(start, len(entries))
    chosen_names = [chosen_request(search, c, r).result_name for r in range(len(spec.requests))]
    for claim_config in spec.config:
        applies = not claim_config.requests or any(
            request.name in claim_config.requests
            or (request.first_available and chosen in claim_config.requests)
            for request, chosen in zip(spec.requests, chosen_names, strict=True)
        )
        if applies:
            entries.append(("FromClaim", list(claim_config.requests), claim_config.opaque))
    configs: list[DeviceAllocationConfiguration] = []
    for source, requests, opaque in entries:
        covers_all = bool(requests) and all(
            request.name in requests or chosen in requests
            for request, chosen in zip(spec.requests, chosen_names, strict=True)
        )
        configs.append(
            DeviceAllocationConfiguration(
                source="FromClass" if source == "FromClass" else "FromClaim",
                requests=() if covers_all else tuple(requests),
                opaque=opaque,
            )
        )
    return tuple(configs)
