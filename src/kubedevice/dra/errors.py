"""The DRA manager's errors. Each str() is the kubelet's own text (its D3 form), so logs and pod events read
the same as on a real node."""

from __future__ import annotations

from kubedevice.pluginwatcher.handler import PluginHandlerError

#: The kubelet's event reasons when PrepareResources or UnprepareResources fails; the daemon shows them
#: as the pod's status reason.
PREPARE_FAILED = "FailedPrepareDynamicResources"
UNPREPARE_FAILED = "FailedUnprepareDynamicResources"


class DRAError(Exception):
    """Base of every error the DRA manager raises on purpose."""


class DRARegistrationError(PluginHandlerError):
    """A DRA plugin's registration was refused (by its checks or by the plugin store); str() is the text the
    plugin is told."""


class DriverLookupError(DRAError):
    """No plugin for a driver: `DRA driver <name> is not registered` or `DRA driver name is empty`."""


class DRACallError(DRAError):
    """A DRAPlugin call failed as a whole: Go's `rpc error: code = <Code> desc = <message>`."""


class PrepareError(DRAError):
    """PrepareResources failed; str() is `prepare dynamic resources: <cause>`."""


class UnprepareError(DRAError):
    """UnprepareResources failed; str() is `unprepare dynamic resources: <cause>`."""


class ContainerClaimsError(DRAError):
    """A container's claims are not in the cache (GetResources, GetContainerClaimInfos)."""


class DRACheckpointError(DRAError):
    """The checkpoint cannot be read at start or written; str() is the kubelet's text.

    `corrupt` says the file itself is unreadable (it may be moved aside), not its directory.
    """

    def __init__(self, message: str, *, corrupt: bool = False) -> None:
        super().__init__(message)
        self.corrupt = corrupt


def unreadable_checkpoint_text(name: str, cause: object) -> str:
    """The kubelet's start error for a checkpoint file it cannot read (D3 wording)."""
    return (
        "create ResourceClaim cache: GetOrCreate() on checkpoint state: "
        f"failed to get checkpoint {name}: {cause}"
    )
