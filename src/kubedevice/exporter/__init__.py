"""`kubedevice exporter`: which pod holds which device, and how full the node is, as Prometheus metrics."""
