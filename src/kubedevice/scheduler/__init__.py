"""The scheduler's DRA allocation as a library: slices, classes and claims in, the allocation (or why there is
none) out. Imports nothing of the daemon and does no I/O."""
