"""The daemon's status API, one package for the daemon and everything that asks it: the contract (socket,
routes, claims, NotFound: :mod:`.contract`), the client (:mod:`.client`), the HTTP server (:mod:`.http`),
the claims part a stand-in kubelet serves (:mod:`.stand_in`), the daemon's paths (:mod:`.paths`) and the
tables its answers print as (:mod:`.tables`). Used by the daemon, the CLI, the SDK, conformance, the kit,
top and the demo; it imports nothing of the daemon."""
