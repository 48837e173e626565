"""DRA kubelet plugin API v1beta1 (Kubernetes 1.32 and newer)."""
