"""Crash consistency of the DRA manager: a real process killed at every stage of its checkpoint writes.

After each kill a new manager restores the file: it always verifies, the crash's temporary file is
gone, and no claim that a pod was told is prepared is forgotten (its entry lists the pod and the
driver's device), so its containers keep their CDI IDs and a later unprepare reaches the driver. The pod
whose prepare the kill cut short may be recorded or not; preparing it again gives its device once.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kubedevice.checkpoint import WRITE_STAGES, decode_dra
from kubedevice.dra import DRAManager
from tests.dra_crash_child import DRIVER, crash_claims, crash_pods
from tests.dra_manager_env import gpu
from tests.dra_plugin import DRATestPlugin
from tests.waiting import short_tempdir

ROOT = Path(__file__).resolve().parents[2]
#: The fresh file's write, then two per pod (cache pass, commit): every write of the four pods.
KILL_AT = range(1, 10)


def _run_child(root: Path, stage: str, nth: int) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.dra_crash_child", str(root), stage, str(nth)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode in (0, 9), done.stderr
    lines = done.stdout.split()
    assert done.returncode == 9 or "done" in lines, "the child neither died at its kill point nor finished"
    return [lines[i + 1] for i, word in enumerate(lines) if word == "prepared"]


@pytest.mark.parametrize("stage", WRITE_STAGES)
async def test_no_claim_told_prepared_is_forgotten(stage: str) -> None:
    for nth in KILL_AT:
        root = short_tempdir("kd-dracrash-")
        told = _run_child(root, stage, nth)
        path = root / "dra_manager_state"
        if path.exists():
            decode_dra(path.read_bytes())  # verifies, or raises
        else:
            assert not told, "a pod was told its claim is prepared before any checkpoint existed"
        plugin = DRATestPlugin(root / "plugins_registry", root, driver=DRIVER)
        for i in range(len(crash_pods())):
            plugin.set_devices(f"u{i}", gpu(f"gpu-{i}"))
        await plugin.start_endpoint()
        manager = DRAManager(root, claims=crash_claims())
        await manager.start()
        assert not [p.name for p in root.iterdir() if p.name.startswith(".")], (
            "the crash's temporary file stayed"
        )
        try:
            restored = {state.claim_name: state for state, _ in manager.claim_infos()}
            for p in crash_pods():
                if p.uid in told:
                    state = restored[f"c{p.uid[1:]}"]
                    assert p.uid in (state.pod_uids or ()), (stage, nth, p.uid)
                    assert manager.get_resources(p, p.containers[0]) == [f"{DRIVER}/gpu=gpu-{p.uid[1:]}"]
            manager.plugin_handler.validate_plugin(DRIVER, plugin.endpoint, ["v1.DRAPlugin"])
            await manager.plugin_handler.register_plugin(DRIVER, plugin.endpoint, ["v1.DRAPlugin"])
            for p in crash_pods():
                await manager.prepare_resources(p)
                assert manager.get_resources(p, p.containers[0]) == [f"{DRIVER}/gpu=gpu-{p.uid[1:]}"]
        finally:
            await manager.stop()
            await plugin.stop()
