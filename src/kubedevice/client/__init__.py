"""The clients of a node: `kubedevice status`, `pods` (our node daemon's status API) and `podresources` (any
PodResources v1 socket, ours or a real kubelet's)."""
