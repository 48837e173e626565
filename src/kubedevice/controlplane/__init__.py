"""The control plane's stand-in on one node: the object store fed by the manifest and slice folders, the
claim status store (`dra_claims.json`), and the claim controllers (templates, reservation, extended
resources). The node daemon reaches it through one facade, `controlplane.plane.ControlPlane`, whose calls
answer outcomes; nothing here writes a pod's status. (The facade is not imported here: the daemon loads
this package only after it serves kubelet.sock.)"""
