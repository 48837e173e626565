"""The `kubedevice` pytest plugin as an author's project meets it: found by entry point, configured by ini."""

from __future__ import annotations

import pytest

pytest_plugins = ("pytester",)

AUTHOR_TEST = """
import pytest

pytestmark = pytest.mark.asyncio


async def test_nothing_registers(kubelet):
    await kubelet.devices()
"""


def test_the_timeout_comes_from_the_ini_and_a_failure_is_one_line(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nkubedevice_timeout = 0.3\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_author=AUTHOR_TEST)

    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")

    result.assert_outcomes(failed=1)
    # The kit's frames are hidden: the report shows the test's own line, then the one-line reason.
    assert "kubedevice/testing" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        ["E  *AssertionError: the plugin did not register within 0.3 s (kubelet.sock is *)"]
    )


def test_a_bad_timeout_stops_the_run_with_one_line(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nkubedevice_timeout = soon\n")
    pytester.makepyfile(test_author=AUTHOR_TEST)

    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")

    assert result.ret != 0
    result.stderr.fnmatch_lines(["ERROR: kubedevice_timeout = 'soon': want a positive number of seconds"])
