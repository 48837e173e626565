"""The kubelet's checkpoint files, byte-compatible both ways: the device manager's
(`kubelet_internal_checkpoint`) and the DRA manager's (`dra_manager_state`).

One concern per module: :mod:`.model` (the data), :mod:`.spew` (the go-spew text and FNV-1a checksum),
:mod:`.json_writer` and :mod:`.json_reader` (Go's ``encoding/json``), :mod:`.decode` (v2 and the pre-1.20 v1
format, verified or not), :mod:`.store` (durable atomic write, safe read, quarantine), :mod:`.encoder` and
:mod:`.writer` (incremental encoding and group commit for the device manager), :mod:`.cli` (the
``kubedevice checkpoint`` command). The DRA file: :mod:`.dra_model` (the claims), :mod:`.dra_codec` (the
JSON with its CRC-32) over :mod:`.dra_reader` (Go's reading rules), :mod:`.dra_store` (on disk),
:mod:`.dra_view` (what ``checkpoint inspect`` and ``verify`` show of it). The managers import this
package; nothing here knows a manager.
"""

from kubedevice.checkpoint.decode import collector_paused, decode, decode_unverified
from kubedevice.checkpoint.dra_codec import (
    UnverifiedDRACheckpoint,
    decode_dra,
    decode_dra_unverified,
    encode_claim_piece,
    encode_dra,
    encode_dra_pieces,
    is_dra_checkpoint,
)
from kubedevice.checkpoint.dra_model import ClaimInfoState, DRACheckpointData, DRADevice
from kubedevice.checkpoint.dra_store import DRACheckpointStore
from kubedevice.checkpoint.errors import (
    CheckpointDirectoryError,
    CheckpointError,
    CheckpointFormatError,
    CheckpointNotFoundError,
    CheckpointUnreadableError,
    CorruptCheckpointError,
    CorruptDRACheckpointError,
)
from kubedevice.checkpoint.json_writer import encode
from kubedevice.checkpoint.model import (
    CheckpointData,
    DecodedCheckpoint,
    PodDevicesEntry,
    UnverifiedCheckpoint,
)
from kubedevice.checkpoint.spew import checksum, spew_text
from kubedevice.checkpoint.store import (
    MAX_CHECKPOINT_BYTES,
    CheckpointFile,
    CheckpointStore,
    read_file,
)
from kubedevice.durable import WRITE_STAGES

__all__ = [
    "MAX_CHECKPOINT_BYTES",
    "WRITE_STAGES",
    "CheckpointData",
    "CheckpointDirectoryError",
    "CheckpointError",
    "CheckpointFile",
    "CheckpointFormatError",
    "CheckpointNotFoundError",
    "CheckpointStore",
    "CheckpointUnreadableError",
    "ClaimInfoState",
    "CorruptCheckpointError",
    "CorruptDRACheckpointError",
    "DRACheckpointData",
    "DRACheckpointStore",
    "DRADevice",
    "DecodedCheckpoint",
    "PodDevicesEntry",
    "UnverifiedCheckpoint",
    "UnverifiedDRACheckpoint",
    "checksum",
    "collector_paused",
    "decode",
    "decode_dra",
    "decode_dra_unverified",
    "decode_unverified",
    "encode",
    "encode_claim_piece",
    "encode_dra",
    "encode_dra_pieces",
    "is_dra_checkpoint",
    "read_file",
    "spew_text",
]
