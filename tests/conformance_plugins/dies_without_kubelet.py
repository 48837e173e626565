"""Broken: gives up and exits when kubelet.sock stays away, instead of waiting for the kubelet to return.

It tolerates the short gap of a quick kubelet restart, so it fails the absence check, not the restart one.
"""

import sys

from _baseline import Plugin, main

#: Longer than a restart's gap, shorter than the checker's absence in the tests.
GIVE_UP_AFTER_S = 0.4


class DiesWithoutKubelet(Plugin):
    async def on_kubelet_gone(self, missing_for_s: float) -> None:
        if missing_for_s > GIVE_UP_AFTER_S:
            print("kubelet.sock is gone; exiting", flush=True)
            sys.exit(3)


if __name__ == "__main__":
    main(DiesWithoutKubelet)
