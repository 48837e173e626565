"""Dynamic resource allocation in the node daemon: documents, slices, allocation, the pod flow's step."""
