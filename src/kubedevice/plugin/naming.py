"""Names the kubelet cares about: the extended resource name and the plugin's socket file name."""

from __future__ import annotations

import re

from kubedevice.plugin.errors import ConfigError
from kubedevice.resource.names import QUALIFIED_NAME, REQUESTS_PREFIX, is_dns_subdomain

_UNSAFE_IN_FILE_NAME = re.compile(r"[^A-Za-z0-9._-]")
#: sun_path is 108 bytes on Linux, one of which is the terminating NUL.
MAX_SOCKET_PATH_BYTES = 107


def resource_name_problem(name: str) -> str | None:
    """Why the kubelet would refuse `name` as an extended resource name, or None if it is fine.

    Checked up front so a typo fails at start with a clear message instead of as a Register error
    repeated forever by the retry loop.
    """
    if "/" not in name or "kubernetes.io/" in name:
        return f"resource name {name!r} must be <vendor-domain>/<name> and not in the kubernetes.io domain"
    if name.startswith(REQUESTS_PREFIX):
        return f"resource name {name!r} must not start with 'requests.'"
    prefix, _, local = (REQUESTS_PREFIX + name).partition("/")
    if "/" in local:
        return f"resource name {name!r} must contain exactly one '/'"
    if not is_dns_subdomain(prefix):
        return f"resource name {name!r}: vendor domain must be a lower-case DNS subdomain"
    if len(local) > 63 or not QUALIFIED_NAME.fullmatch(local):
        return (
            f"resource name {name!r}: the part after '/' must be 1-63 characters of "
            "letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        )
    return None


def check_resource_name(name: str) -> str:
    """Return `name` if the kubelet would accept it, else raise ConfigError saying why."""
    problem = resource_name_problem(name)
    if problem is not None:
        raise ConfigError(problem)
    return name


def socket_stem(resource_name: str) -> str:
    """A file-name-safe form of the resource name, used as the prefix of the plugin's sockets."""
    return _UNSAFE_IN_FILE_NAME.sub("_", resource_name)


def check_socket_path(path: str) -> str:
    """Refuse a socket path the kernel cannot bind, naming it, before grpc fails obscurely."""
    if len(path.encode()) > MAX_SOCKET_PATH_BYTES:
        raise ConfigError(
            f"socket path {path!r} is {len(path.encode())} bytes, over the {MAX_SOCKET_PATH_BYTES}-byte "
            "unix socket limit; use a shorter directory"
        )
    return path
