"""The DRA resource health service (`DRAResourceHealth`: NodeWatchResources), v1 and v1alpha1."""
