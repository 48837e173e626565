"""The DRA kubelet plugin service (`DRAPlugin`: NodePrepareResources, NodeUnprepareResources), v1 and v1beta1."""
