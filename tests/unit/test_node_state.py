import asyncio
import json
import os
from pathlib import Path

from kubedevice.node.conditions import PodCondition
from kubedevice.node.state import PodStateFile, SavedPod

POD = SavedPod(
    namespace="ns", name="p", phase="Failed", reason="UnexpectedAdmissionError", message="m", digest="d"
)


async def test_round_trip_and_atomic_write(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    await PodStateFile(path).save(lambda: {"uid-1": POD})
    assert PodStateFile(path).load() == {"uid-1": POD}
    assert os.listdir(tmp_path) == ["state.json"]  # no temp file left behind
    assert json.loads(path.read_text())["version"] == 1


async def test_concurrent_saves_share_writes_and_each_sees_its_state_on_disk(tmp_path: Path) -> None:
    store = PodStateFile(tmp_path / "state.json")
    live: dict[str, SavedPod] = {}
    snapshots: list[dict[str, SavedPod]] = []

    def snapshot() -> dict[str, SavedPod]:
        snapshots.append(dict(live))
        return dict(live)

    async def change_and_save(i: int) -> None:
        live[f"uid-{i}"] = POD
        await store.save(snapshot)
        # Returned only once a write that began after this change is on disk.
        assert f"uid-{i}" in PodStateFile(tmp_path / "state.json").load()

    await asyncio.gather(*(change_and_save(i) for i in range(20)))
    assert store.load() == live
    assert len(snapshots) < 20  # group commit: saves asked for during a write shared the next one


def test_missing_or_unreadable_files_are_empty(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    assert PodStateFile(path).load() == {}
    for body in ("{not json", "[]", '{"version": 9, "pods": {}}', '{"version": 1, "pods": []}'):
        path.write_text(body)
        assert PodStateFile(path).load() == {}
    path.write_text(json.dumps({"version": 1, "pods": {"a": {"phase": "Failed"}, "b": vars_of(POD)}}))
    assert PodStateFile(path).load() == {"b": POD}  # the malformed entry is skipped, the rest kept


def vars_of(pod: SavedPod) -> dict[str, str]:
    return {k: getattr(pod, k) for k in SavedPod.__dataclass_fields__}


async def test_the_boot_id_is_kept_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    first = PodStateFile(path, boot_id="boot-a")
    assert first.load() == {} and first.saved_boot_id is None  # no file: no previous boot known
    await first.save(dict)  # written even with no pods, so the next start knows the boot
    assert json.loads(path.read_text())["bootID"] == "boot-a"
    second = PodStateFile(path, boot_id="boot-b")
    second.load()
    assert second.saved_boot_id == "boot-a"  # the daemon compares this with its own boot
    await second.save(dict)
    assert json.loads(path.read_text())["bootID"] == "boot-b"


def test_current_boot_id(tmp_path: Path) -> None:
    from kubedevice.node.boot import current_boot_id

    boot = tmp_path / "boot_id"
    boot.write_text("1a2b\n")
    assert current_boot_id(path=boot) == "1a2b"
    assert current_boot_id("override", path=boot) == "override"
    assert current_boot_id(path=tmp_path / "absent") == ""


async def test_a_save_that_changes_nothing_writes_nothing(tmp_path: Path) -> None:
    """An admission that wrote the checkpoint saves the same set: it must cost no second fsync."""
    path = tmp_path / "state.json"
    store = PodStateFile(path, boot_id="boot-a")
    store.load()
    running = SavedPod("default", "zero", "Running", "", "", "sha256:1")
    await store.save(lambda: {"uid-1": running})
    written = path.stat().st_ino  # every write renames a new file over the old one
    await store.save(lambda: {"uid-1": running})
    assert path.stat().st_ino == written
    reread = PodStateFile(path, boot_id="boot-a")
    assert reread.load() == {"uid-1": running}  # a Running pod without devices reads back as it was
    await reread.save(lambda: {"uid-1": running})
    assert path.stat().st_ino == written  # what was loaded counts as written


async def test_an_evicted_pods_condition_is_kept_and_other_pods_write_none(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    condition = PodCondition(
        "DisruptionTarget",
        "True",
        "DeletionByDeviceTaintManager",
        "Device Taint manager: deleting due to NoExecute taint",
        "2026-07-24T10:00:00Z",
    )
    evicted = SavedPod("ns", "e", "Failed", condition.reason, condition.message, "d", (condition,))
    await PodStateFile(path).save(lambda: {"uid-1": POD, "uid-2": evicted})
    assert PodStateFile(path).load() == {"uid-1": POD, "uid-2": evicted}
    pods = json.loads(path.read_text())["pods"]
    assert "conditions" not in pods["uid-1"]
    assert pods["uid-2"]["conditions"] == [condition.to_json()]
