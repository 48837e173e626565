"""Ready plugins, runnable from `kubedevice plugin ...` and each a worked example of the SDK."""

from kubedevice.plugin.builtin.fake import FakeConfig, FakePlugin, prefer_numa_packed
from kubedevice.plugin.builtin.paths import PathsPlugin, path_device_id

__all__ = ["FakeConfig", "FakePlugin", "PathsPlugin", "path_device_id", "prefer_numa_packed"]
