"""How the long-running commands log (`node`, `plugin`): one format on stderr, at the `--log-level` chosen.

The level is kubedevice's own. gRPC's Python modules log their internals at debug level (every event loop
they bind, the I/O engine), and its C core logs by GRPC_VERBOSITY (errors only by default, read when grpc
is imported); neither is what `--log-level debug` asks for. So the `grpc` loggers show warnings and errors
only, unless GRPC_VERBOSITY is set (debug, info, error or none, as gRPC reads it): then they follow it too.
"""

from __future__ import annotations

import logging
import os
import re
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


# C0 and C1 controls, DEL, lone surrogates (which stderr could not even encode), and the invisible
# characters that reorder or break what a terminal shows (bidirectional marks, embeddings, overrides and
# isolates; the line and paragraph separators): a name holding U+202E would show the rest of its line
# backwards.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def escaped(text: str) -> str:
    """`text` with every control character written as an escape (ESC as `\\x1b`, a newline as `\\x0a`): a
    name from a document or a file name can neither colour the terminal nor forge a log line."""
    return _CONTROL.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class EscapingFormatter(logging.Formatter):
    """FORMAT with the message escaped (a traceback, appended after, keeps its lines): names from
    documents, manifest file names and claim keys reach the log through every line the daemon writes."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escaped(record.message)
        return super().formatMessage(record)


def configure_logging(level: int, environ: MutableMapping[str, str] = os.environ) -> None:
    """Log to stderr at `level`; gRPC's Python loggers at warnings unless GRPC_VERBOSITY asks for more."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(EscapingFormatter(FORMAT))
    logging.basicConfig(level=level, handlers=[handler])
    asked = environ.get("GRPC_VERBOSITY", "").upper()
    logging.getLogger("grpc").setLevel(GRPC_LEVELS.get(asked, max(level, logging.WARNING)))
    # For a gRPC core that reads it later than its import (and any process started from here): errors.
    environ.setdefault("GRPC_VERBOSITY", "ERROR")
    # asyncio says which selector it chose at debug level; its warnings (slow callbacks) still show.
    logging.getLogger("asyncio").setLevel(max(level, logging.INFO))
