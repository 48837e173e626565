"""The Kubernetes objects of resource.k8s.io: one internal shape, the documents in every
supported version, validation that names the field path. Used by the daemon, the scheduler, the SDK and the
status API; does no I/O beyond reading one file's bytes into documents."""
