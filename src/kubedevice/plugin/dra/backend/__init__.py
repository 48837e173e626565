"""Where a DRA driver's claims come from and its ResourceSlices go: the API server or the node daemon.

`make_backend` picks the mode as the kubelet plugin helper's users expect: **cluster mode** when the
plugin runs in a pod (`KUBERNETES_SERVICE_HOST` set: the in-cluster configuration) or when a kubeconfig
is passed explicitly (`$KUBECONFIG` alone does not switch modes, so a developer's shell does not turn a
local try-out into a cluster driver); else **standalone**, next to `kubedevice node`. The client library
is imported only in cluster mode (by `kube`, through `cluster`), so a standalone plugin starts without it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from kubedevice.plugin.dra.backend.errors import DRABackendError
from kubedevice.plugin.dra.backend.slices import SliceContentError
from kubedevice.plugin.dra.backend_api import DRABackend

__all__ = ["DRABackendError", "SliceContentError", "cluster_mode", "make_backend"]


def cluster_mode(kubeconfig: str | None, environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return bool(kubeconfig) or bool(env.get("KUBERNETES_SERVICE_HOST"))


def make_backend(
    *,
    kubelet_dir: Path,
    driver_name: str,
    kubeconfig: str | None = None,
    node_name: str | None = None,
) -> DRABackend:
    """The backend for this driver: cluster mode or standalone (see the module's text).

    The node name is `node_name`, else `$NODE_NAME`; standalone, the node daemon's when neither is set
    (asked in `start()`). Raises DRABackendError when cluster mode has no node name.
    """
    name = node_name or os.environ.get("NODE_NAME") or None
    if cluster_mode(kubeconfig):
        from kubedevice.plugin.dra.backend.cluster import ClusterBackend

        if name is None:
            raise DRABackendError(
                "cluster mode needs the node's name — set NODE_NAME (from spec.nodeName through the "
                "downward API) or pass node_name"
            )
        return ClusterBackend(driver_name=driver_name, node_name=name, kubeconfig=kubeconfig or None)
    from kubedevice.plugin.dra.backend.standalone import StandaloneBackend

    return StandaloneBackend(kubelet_dir=kubelet_dir, driver_name=driver_name, node_name=name)
