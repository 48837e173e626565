"""kubedevice.testing stays usable without pytest: only its pytest plugin module imports pytest."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys
import kubedevice.testing as kit
names = [kit.StandInKubelet, kit.StandInDRAKubelet, kit.Node, kit.run_conformance, kit.ConformanceReport]
names.append(kit.PluginCallFailed)
print(sorted(m for m in ("pytest", "_pytest", "pytest_asyncio") if m in sys.modules))
"""


def test_the_kit_imports_without_pytest() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "[]", "")


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    import kubedevice.testing as kit

    with pytest.raises(AttributeError) as missing:
        kit.NoSuchFixture  # noqa: B018 - the lookup itself is the test
    assert str(missing.value) == "module 'kubedevice.testing' has no attribute 'NoSuchFixture'"
