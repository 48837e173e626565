"""The clients of a node: `kubedevice status`, `pods` and `claims` (cli.py: our node daemon's status API)
and `podresources` (podresources/: any PodResources v1 socket, ours or a real kubelet's)."""
