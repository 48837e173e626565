"""What a pod becomes when the daemon starts again: the state file's Failed and Succeeded pods stay so, and a
pod that was Running before a restart of the daemon (same boot) goes on without a new admission; and what
the state file must keep for that."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Set

from kubedevice.controlplane.plane import ControlPlane
from kubedevice.dra import DRAError
from kubedevice.manager import DeviceManager, Pod
from kubedevice.node.admission import allocate_pod, start_containers, unknown_requests
from kubedevice.node.dynamic_resources import DynamicResources
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
        record.reason, record.message, record.conditions = saved.reason, saved.message, saved.conditions
        log.info("pod %s stays %s after the restart", pod_name(record.pod), record.phase)
        return True
    return False


async def restore_running(
    topology: TopologyManager,
    manager: DeviceManager,
    control: ControlPlane,
    dynamic: DynamicResources,
    record: PodRecord,
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
    if record.has_claims:
        record.dra_pod = control.restore(record.pod, record.manifest.claims)
        try:
            options = dynamic.run_options(record.dra_pod, options)
        except DRAError as err:
            log.warning("pod %s is admitted again: %s", pod_name(record.pod), err)
            return False
        record.warnings += unknown_requests(record.dra_pod, control.claims.claim)
    record.run_options = options
    record.phase = "Running"
    return True


def remembered(
    pods: Iterable[PodRecord], starting: Set[str], with_devices: Set[str], dynamic: DynamicResources
) -> dict[str, SavedPod]:
    """What the state file keeps: the pods a restart cannot learn from the checkpoints.

    Failed and Succeeded pods (a restart must not admit them again) and Running pods that no checkpoint
    shows running (a restart must not fail them), `starting` ones included. A Running pod with devices
    is in the device checkpoint (`with_devices`), one with claims in the DRA checkpoint (its claims'
    entries list it, with their devices), and a Pending pod is admitted again anyway: none costs a write.
    """
    kept: dict[str, SavedPod] = {}
    for record in pods:
        if record.uid in starting:
            kept[record.uid] = record.saved("Running")
            continue
        running = record.phase == "Running" and not on_record(record, with_devices, dynamic)
        if not record.terminating and (running or not record.active):
            kept[record.uid] = record.saved()
    return kept


def on_record(record: PodRecord, with_devices: Set[str], dynamic: DynamicResources) -> bool:
    """A checkpoint shows the pod running: its DRA claims' entries, or else its device checkpoint entry."""
    if record.has_claims:
        return dynamic.prepared_on_record(record.dra_pod)
    return record.uid in with_devices


def was_running(saved: SavedPod | None, manifest: PodManifest) -> bool:
    """The state file says this very pod version was Running (one no checkpoint shows running)."""
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
