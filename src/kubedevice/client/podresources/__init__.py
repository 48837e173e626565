"""`kubedevice podresources`: a client of any PodResources v1 socket (the node daemon's or a real
kubelet's). Apart from the status API's commands so that those load no gRPC."""
