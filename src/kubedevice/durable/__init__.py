"""Files that must survive a crash: replaced whole and durably, written by group commit.

:mod:`.replace` replaces one file (temporary file, fsync, rename, folder fsync, a fault hook for crash
tests) and removes the temporary files a crash left; :mod:`.group_commit` keeps a file in step with state
that changes on the event loop (one write at a time, on a thread, shared by the callers that ask meanwhile).
"""

from kubedevice.durable.group_commit import GroupCommit
from kubedevice.durable.replace import (
    FOLDER_SYNCED,
    WRITE_STAGES,
    Fault,
    TempNames,
    fsync_folder,
    remove_stale_temp_files,
    replace_file,
)

__all__ = [
    "FOLDER_SYNCED",
    "WRITE_STAGES",
    "Fault",
    "GroupCommit",
    "TempNames",
    "fsync_folder",
    "remove_stale_temp_files",
    "replace_file",
]
