"""SIGTERM at any moment of a plugin's start-up stops it, once (it was once seen to need a second one).

`kubedevice plugin fake --metrics-port 0` is started again and again and sent SIGTERM after a seeded random
delay covering interpreter start, argument parsing, the metrics server, serving and registration.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time

from tests.plugin_kubelet import plugin_dir
from tests.plugin_process import KUBEDEVICE
from tests.waiting import DEADLINE_S

__all__ = ["plugin_dir"]

TRIES = 12


def test_sigterm_at_random_moments_of_start_up_stops_the_plugin(plugin_dir: str) -> None:
    rng = random.Random(20261203)
    for attempt in range(TRIES):
        process = subprocess.Popen(
            [KUBEDEVICE, "plugin", "fake", "--resource", "example.com/fake", "--devices", "2",
             "--plugin-dir", plugin_dir, "--metrics-port", "0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        delay = rng.uniform(0.0, 0.8)
        time.sleep(delay)  # the kill moment under test, not a wait for a condition
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise AssertionError(f"try {attempt}: SIGTERM {delay:.3f}s after start left it running") from None
        # Before Python installs its handler the default action ends it (-15); after, it stops cleanly (0).
        stderr = process.stderr.read() if process.stderr else b""
        assert code in (0, -signal.SIGTERM), (attempt, delay, code, stderr)
