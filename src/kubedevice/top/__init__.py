"""`kubedevice top`: a live view of which pod holds which device, per resource and NUMA node."""
