"""The DRA kubelet plugin service (`DRAPlugin`: NodePrepareResources, NodeUnprepareResources)."""
