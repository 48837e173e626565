"""The DRA manager's handler of plugins_registry registrations (type `DRAPlugin`): the kubelet's
ValidatePlugin, RegisterPlugin and DeRegisterPlugin of its DRA plugin manager (D3).

The service is chosen in the plugin's order among those the node calls (v1.DRAPlugin, v1beta1.DRAPlugin);
the 1.31 service (v1alpha3) is refused like any unknown name. Beyond the kubelet, which checks neither, the
driver name must be a DNS subdomain (it names the driver's ResourceSlices and files) and the endpoint an
absolute path that fits a unix socket address.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from kubedevice.api.constants import DRA_HEALTH_SERVICES, DRA_SUPPORTED_SERVICES
from kubedevice.dra.errors import DRARegistrationError
from kubedevice.dra.plugins import DRAPlugins
from kubedevice.wording import go_quote, go_quote_list

#: The longest unix socket path Linux accepts (sun_path is 108 bytes with the terminating NUL).
MAX_UNIX_SOCKET_PATH = 107
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*")
_DNS1123_SUBDOMAIN_TEXT = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
    "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    f"'{_DNS1123_SUBDOMAIN.pattern}')"
)


def check_driver_name(name: str) -> None:
    if not name:
        raise DRARegistrationError("DRA driver name is empty")
    if len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name):
        raise DRARegistrationError(f"invalid DRA driver name {go_quote(name)}: {_DNS1123_SUBDOMAIN_TEXT}")


def check_endpoint(name: str, endpoint: str) -> None:
    if "\x00" in endpoint or not os.path.isabs(endpoint):
        raise DRARegistrationError(
            f"invalid endpoint {go_quote(endpoint)} of DRA driver plugin {name}: it must be an absolute path"
        )
    if len(endpoint.encode()) > MAX_UNIX_SOCKET_PATH:
        raise DRARegistrationError(
            f"invalid endpoint {go_quote(endpoint)} of DRA driver plugin {name}: it is longer than "
            f"{MAX_UNIX_SOCKET_PATH} bytes, the limit of a unix socket path"
        )


def choose_service(name: str, endpoint: str, versions: Sequence[str]) -> str:
    """The first of the plugin's services, in its order, that the node calls (validateSupportedServices)."""
    if not versions:
        cause = "empty list of supported gRPC services (aka supported versions)"
    else:
        chosen = next((v for v in versions if v in DRA_SUPPORTED_SERVICES), None)
        if chosen is not None:
            return chosen
        cause = (
            f"none of services supported by the plugin ({go_quote_list(versions)}) "
            f"are supported by the kubelet ({go_quote_list(DRA_SUPPORTED_SERVICES)})"
        )
    raise DRARegistrationError(
        f"invalid supported gRPC versions of DRA driver plugin {name} at endpoint {endpoint}: {cause}"
    )


def choose_health_service(versions: Sequence[str]) -> str | None:
    """v1.DRAResourceHealth if advertised, else v1alpha1.DRAResourceHealth, else no health stream."""
    return next((s for s in DRA_HEALTH_SERVICES if s in versions), None)


def validate(name: str, endpoint: str, versions: Sequence[str]) -> str:
    """All checks of a DRA plugin's registration; the chosen DRAPlugin service."""
    check_driver_name(name)
    check_endpoint(name, endpoint)
    return choose_service(name, endpoint, versions)


class DRARegistrationHandler:
    """The PluginHandler of type `DRAPlugin`: checks each registration, then adds it to (or removes it from)
    the DRA plugin store."""

    def __init__(self, plugins: DRAPlugins) -> None:
        self._plugins = plugins

    def validate_plugin(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        validate(name, endpoint, versions)

    async def register_plugin(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        # Checked again, as the kubelet's RegisterPlugin does: it is also called without ValidatePlugin.
        service = validate(name, endpoint, versions)
        self._plugins.add(name, endpoint, service, choose_health_service(versions))

    async def deregister_plugin(self, name: str, endpoint: str) -> None:
        await self._plugins.remove(name, endpoint)
