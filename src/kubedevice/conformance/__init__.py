"""The plugin conformance checker: runs any device plugin against a stand-in kubelet and says what is wrong.

Public API: :func:`run_conformance` with :class:`ConformanceOptions`, returning a :class:`Report` of
:class:`CheckResult` rows; the CLI is `kubedevice conformance`.
"""

from kubedevice.conformance.report import CheckResult, Report, Result
from kubedevice.conformance.runner import CommandError, ConformanceOptions, run_conformance

__all__ = ["CheckResult", "CommandError", "ConformanceOptions", "Report", "Result", "run_conformance"]
