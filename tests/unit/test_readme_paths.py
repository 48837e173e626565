"""The README test's path swap: /tmp/kd and /tmp/kdN as whole paths only, never inside another path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_readme_commands import swap_root

ROOT = Path("/tmp/kd-readme-x1/kd")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("kubedevice node --root-dir /tmp/kd &", f"kubedevice node --root-dir {ROOT} &"),
        ("--plugin-dir /tmp/kd/device-plugins", f"--plugin-dir {ROOT}/device-plugins"),
        ("cp a.yaml /tmp/kd/manifests/", f"cp a.yaml {ROOT}/manifests/"),
        ("--root-dir /tmp/kd2 --numa-nodes 2", f"--root-dir {ROOT}2 --numa-nodes 2"),
        ("--socket=/tmp/kd/x.sock", f"--socket={ROOT}/x.sock"),
        ("--root-dir '/tmp/kd'", f"--root-dir '{ROOT}'"),
        ('--root-dir "/tmp/kd/a b"', f'--root-dir "{ROOT}/a b"'),
    ],
)
def test_the_readme_folders_are_swapped_as_whole_paths(line: str, expected: str) -> None:
    assert swap_root(line, ROOT) == expected


@pytest.mark.parametrize(
    "line",
    [
        # The interpreter of a checkout under a folder whose name starts with /tmp/kd.
        "/tmp/kdevel/kubedevice/.venv/bin/python examples/thermal_widget.py --root examples/widgets",
        "/tmp/kd-work/.venv/bin/kubedevice status",
        "/home/me/tmp/kd/bin/python",
        "/var/tmp/kd/x",
        "--cdi-spec-dir /tmp/kd-cdi",
    ],
)
def test_other_paths_that_merely_contain_tmp_kd_are_left_alone(line: str) -> None:
    assert swap_root(line, ROOT) == line
