"""The daemon's status API as a contract: paths under the root, the HTTP server and client, the routes,
and the tables its answers print as. Used by the daemon, the CLI, the SDK, conformance, the kit, the
exporter and top."""
