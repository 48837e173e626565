"""How the long-running commands log (`node`, `plugin`): one format on stderr, at the `--log-level` chosen.

The level is kubedevice's own. gRPC's Python modules log their internals at debug level (every event loop
they bind, the I/O engine), and its C core logs by GRPC_VERBOSITY; neither is what `--log-level debug`
asks for. So unless GRPC_VERBOSITY is set, the C core logs errors only and the `grpc` loggers warnings
and errors; with GRPC_VERBOSITY set (debug, info, error or none, as gRPC reads it) both follow it.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import MutableMapping

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: GRPC_VERBOSITY's values, as the level of the `grpc` Python loggers.
GRPC_LEVELS = {
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "ERROR": logging.ERROR,
    "NONE": logging.CRITICAL + 1,
}


def configure_logging(level: int, environ: MutableMapping[str, str] = os.environ) -> None:
    """Log to stderr at `level`; gRPC's own logs stay at errors and warnings unless GRPC_VERBOSITY asks.

    Call it before the first gRPC channel or server is made: the C core reads GRPC_VERBOSITY then.
    """
    logging.basicConfig(level=level, stream=sys.stderr, format=FORMAT)
    asked = environ.get("GRPC_VERBOSITY", "").upper()
    if asked in GRPC_LEVELS:
        logging.getLogger("grpc").setLevel(GRPC_LEVELS[asked])
    else:
        # The C core's default is ERROR already; set it so an inherited empty or unknown value means that.
        environ["GRPC_VERBOSITY"] = "ERROR"
        logging.getLogger("grpc").setLevel(max(level, logging.WARNING))
    # asyncio says which selector it chose at debug level; its warnings (slow callbacks) still show.
    logging.getLogger("asyncio").setLevel(max(level, logging.INFO))
