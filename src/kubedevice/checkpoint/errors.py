"""What can go wrong with a checkpoint file: one exception hierarchy, one-line messages."""

from __future__ import annotations

from pathlib import Path


class CheckpointError(Exception):
    """Base of every checkpoint error; str() is a one-line human message."""


class CheckpointNotFoundError(CheckpointError):
    """There is no checkpoint file: the manager starts with empty state."""

    def __init__(self, path: Path | str) -> None:
        super().__init__(f"checkpoint is not found: {path}")
        self.path = Path(path)


class CheckpointFormatError(CheckpointError):
    """The bytes are not a checkpoint: a JSON syntax error, a value of the wrong type, bad base64."""


class CheckpointUnreadableError(CheckpointFormatError):
    """The path exists but cannot be read as a checkpoint file (a directory, no permission, an I/O error)."""


class CorruptCheckpointError(CheckpointError):
    """The content does not hash to the checksum written in the file."""

    def __init__(self, expected: int, found: int) -> None:
        super().__init__(f"checksum mismatch: file says {found}, content hashes to {expected}")
        #: What the content hashes to.
        self.expected = expected
        #: What the file says.
        self.found = found


class CorruptDRACheckpointError(CorruptCheckpointError):
    """The DRA checkpoint's ``Data`` string does not hash to its ``Checksum`` (CRC-32).

    str() is the kubelet's text, exactly ``checkpoint is corrupted``, because callers build the kubelet's
    start error around it; the two numbers stay available as attributes.
    """

    def __init__(self, expected: int, found: int) -> None:
        CheckpointError.__init__(self, "checkpoint is corrupted")
        self.expected = expected
        self.found = found


class CheckpointDirectoryError(CheckpointError):
    """The checkpoint's directory cannot be used: it cannot be made, is no directory, or refuses a file."""

    def __init__(self, directory: Path | str, reason: str) -> None:
        super().__init__(f"cannot use checkpoint directory {directory}: {reason}")
        self.directory = Path(directory)
