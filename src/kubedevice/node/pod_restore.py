"""What a pod becomes when the daemon starts again: the state file's Failed and Succeeded pods stay so, and a
pod that was Running before a restart of the daemon (same boot) goes on without a new admission."""

from __future__ import annotations

import logging

from kubedevice.dra import DRAError
from kubedevice.manager import DeviceManager, Pod
from kubedevice.node.admission import allocate_pod, start_containers
from kubedevice.node.dra.flow import DRAFlow, has_claims
from kubedevice.node.manifests import PodManifest
from kubedevice.node.pods import PodRecord
from kubedevice.node.state import SavedPod
from kubedevice.topology import TopologyManager

log = logging.getLogger("kubedevice.node.daemon")


def restore_terminated(record: PodRecord, saved: SavedPod | None) -> bool:
    """The pod finished before (its manifest says so, or the state file for this very version): it stays."""
    if record.manifest.succeeded:
        record.phase = "Succeeded"
        return True
    if (
        saved is not None
        and saved.digest == record.manifest.digest
        and saved.phase in ("Failed", "Succeeded")
    ):
        record.phase = "Failed" if saved.phase == "Failed" else "Succeeded"
        record.reason, record.message = saved.reason, saved.message
        log.info("pod %s stays %s after the restart", pod_name(record.pod), record.phase)
        return True
    return False


async def restore_running(
    topology: TopologyManager, manager: DeviceManager, dra: DRAFlow, record: PodRecord
) -> bool:
    """A pod that was Running before the restart (same boot) goes on without a new admission: True.

    Its containers are still running, so they keep what they hold, devices or none, with no health or
    registration check: the kubelet's already-running path, which a restart must never fail. Its claims
    are not prepared again; their CDI IDs come from the DRA checkpoint. False when they are not there
    (the checkpoint was moved aside): the pod is admitted again, its claims prepared again.
    Raises DeviceManagerError.
    """
    record.warnings = await allocate_pod(topology, manager, record.device_pod, already_running=True)
    options = await start_containers(manager, record.device_pod, already_running=True)
    if has_claims(record):
        dra.restore(record)
        try:
            options = dra.run_options(record, options)
        except DRAError as err:
            log.warning("pod %s is admitted again: %s", pod_name(record.pod), err)
            return False
    record.run_options = options
    record.phase = "Running"
    return True


def was_running(saved: SavedPod | None, manifest: PodManifest) -> bool:
    """The state file says this very pod version was Running (one without a checkpoint entry, or one
    with claims)."""
    return saved is not None and saved.phase == "Running" and saved.digest == manifest.digest


def pod_name(pod: Pod) -> str:
    return f"{pod.namespace}/{pod.name} ({pod.uid})"


#: Above this many, pods that went the same way at start-up make one line (each is logged at debug level):
#: a node restarting with 10^4 pods must not write 10^4 lines before it serves.
_LOG_EACH = 10


def log_pods(pods: list[str], one: str, many: str) -> None:
    if len(pods) <= _LOG_EACH:
        for pod in pods:
            log.info(one, pod)
        return
    log.info(many, len(pods), ", ".join(pods[:3]))
    for pod in pods:
        log.debug(one, pod)
