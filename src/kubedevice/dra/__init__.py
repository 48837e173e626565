"""The node side's second manager: the kubelet's DRA manager (`pkg/kubelet/cm/dra`) as a library.

It knows nothing of the node daemon, manifests or HTTP: pods come from the caller, claims from a
ClaimSource, drivers register through the plugins_registry watcher (kubedevice.pluginwatcher).
"""
