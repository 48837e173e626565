"""The kubelet's device-manager checkpoint file (`kubelet_internal_checkpoint`), byte-compatible both ways.

One concern per module: :mod:`.model` (the data), :mod:`.spew` (the go-spew text and FNV-1a checksum),
:mod:`.json_writer` and :mod:`.json_reader` (Go's ``encoding/json``), :mod:`.decode` (v2 and the pre-1.20 v1
format, verified or not), :mod:`.store` (durable atomic write, safe read, quarantine), :mod:`.encoder` and
:mod:`.writer` (incremental encoding and group commit for the device manager), :mod:`.cli` (the
``kubedevice checkpoint`` command). The device manager imports this package; nothing here knows the manager.
"""

from kubedevice.checkpoint.decode import collector_paused, decode, decode_unverified
from kubedevice.checkpoint.errors import (
    CheckpointError,
    CheckpointFormatError,
    CheckpointNotFoundError,
    CheckpointUnreadableError,
    CorruptCheckpointError,
)
from kubedevice.checkpoint.json_writer import encode
from kubedevice.checkpoint.model import (
    CheckpointData,
    DecodedCheckpoint,
    PodDevicesEntry,
    UnverifiedCheckpoint,
)
from kubedevice.checkpoint.spew import checksum, spew_text
from kubedevice.checkpoint.store import MAX_CHECKPOINT_BYTES, WRITE_STAGES, CheckpointStore, read_file

__all__ = [
    "MAX_CHECKPOINT_BYTES",
    "WRITE_STAGES",
    "CheckpointData",
    "CheckpointError",
    "CheckpointFormatError",
    "CheckpointNotFoundError",
    "CheckpointStore",
    "CheckpointUnreadableError",
    "CorruptCheckpointError",
    "DecodedCheckpoint",
    "PodDevicesEntry",
    "UnverifiedCheckpoint",
    "checksum",
    "collector_paused",
    "decode",
    "decode_unverified",
    "encode",
    "read_file",
    "spew_text",
]
