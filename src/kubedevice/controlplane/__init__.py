"""The control plane's stand-in on one node: the object store fed by the manifest and slice folders, the claim
status store (`dra_claims.json`), and the claim controllers (templates, reservation, extended resources)."""
