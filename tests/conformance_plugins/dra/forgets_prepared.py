"""Broken: keeps no record of what it prepared, and answers a claim prepared again with another device.

It plays a driver whose state is lost between two calls by making every call look like a new boot.
"""

import os
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

from _driver import DRIVER, Gpus, main

from kubedevice.plugin.dra.model import Claim, PreparedDevice

BOOT = Path(sys.argv[1]) / "boot_id"


class ForgetsPrepared(Gpus):
    calls = 0

    async def prepare(self, claim: Claim) -> Sequence[PreparedDevice]:
        if any(r.device_id is None for r in claim.results):
            raise ValueError(f"claim {claim}: a device that is not one of {DRIVER}'s")
        ForgetsPrepared.calls += 1
        BOOT.write_text(uuid.uuid4().hex)  # the SDK runs the hook again at the next call
        device = f"gpu-{ForgetsPrepared.calls % 2}"
        return [PreparedDevice(r, (f"{DRIVER}/gpu={device}",)) for r in claim.results]


if __name__ == "__main__":
    os.makedirs(sys.argv[1], exist_ok=True)
    BOOT.write_text("first")
    main(ForgetsPrepared, boot_id_file=BOOT)
