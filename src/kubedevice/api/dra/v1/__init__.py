"""DRA kubelet plugin API v1 (Kubernetes 1.34 and newer)."""
