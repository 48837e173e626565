"""The console script as a user runs it."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import kubedevice

KUBEDEVICE = str(Path(sys.executable).parent / "kubedevice")


def test_version() -> None:
    out = subprocess.run([KUBEDEVICE, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"kubedevice {kubedevice.__version__}"
    # The installed distribution carries the same version (pyproject.toml reads it from the package).
    assert importlib.metadata.version("kubedevice") == kubedevice.__version__


def test_help_lists_usage() -> None:
    out = subprocess.run([KUBEDEVICE, "--help"], capture_output=True, text=True, check=True)
    assert "Usage" in out.stdout and "kubedevice" in out.stdout


def test_unknown_command_is_a_usage_error() -> None:
    out = subprocess.run([KUBEDEVICE, "no-such-command"], capture_output=True, text=True)
    assert out.returncode == 2
    assert "no-such-command" in out.stderr
    assert "Traceback" not in out.stderr


def test_each_tool_loads_only_its_own_modules() -> None:
    # `kubedevice plugin ...` must not pay for the node daemon, nor the daemon for the SDK or the checker.
    probe = (
        "import sys; from kubedevice.cli_group import app; import typer.main; "
        "group = typer.main.get_command(app); "
        "ctx = group.make_context('kubedevice', [sys.argv[1]], resilient_parsing=True); "
        "group.get_command(ctx, sys.argv[1]); "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('kubedevice.', 'rich', 'yaml')))))"
    )

    def loaded(command: str) -> set[str]:
        out = subprocess.run(
            [sys.executable, "-c", probe, command], capture_output=True, text=True, check=True
        )
        return set(out.stdout.split())

    plugin = loaded("plugin")
    assert "kubedevice.plugin.cli" in plugin
    assert not {m for m in plugin if m.startswith(("kubedevice.node", "kubedevice.conformance"))}
    node = loaded("node")
    assert "kubedevice.node.cli" in node
    # "kubedevice.plugin." with its dot: kubedevice.pluginwatcher is the node side's.
    assert not {m for m in node if m.startswith(("kubedevice.plugin.", "kubedevice.conformance"))}
    assert "kubedevice.plugin" not in node
    # Nor does the daemon load before serving what only a table, a manifest or a status view needs.
    assert not {m for m in node if m.startswith(("rich", "yaml", "kubedevice.node.views"))}
    assert not {m for m in node if m.startswith(("prometheus_client", "kubedevice.node.pod_sync"))}


#: Run as `python -c PROBE ARGS...`: `kubedevice ARGS...`, then a last line with the modules it loaded.
EXIT_PROBE = """
import atexit, sys
atexit.register(lambda: print("MODULES", " ".join(sorted(sys.modules)), flush=True))
sys.argv = ["kubedevice", *sys.argv[1:]]
from kubedevice.cli import run
run()
"""

#: Every tool's package: what a command that is not that tool must not load.
TOOL_MODULES = tuple(
    f"kubedevice.{p}" for p in ("checkpoint", "client", "conformance", "exporter", "node", "plugin", "top")
)


def _loaded_by(*args: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", EXIT_PROBE, *args], capture_output=True, text=True, timeout=60
    )
    [line] = [line for line in out.stdout.splitlines() if line.startswith("MODULES ")]
    return set(line.split()[1:])


def test_the_command_list_and_the_version_load_no_tool() -> None:
    listing = _loaded_by("--help")
    assert not {m for m in listing if m.startswith((*TOOL_MODULES, "rich", "grpc", "google.protobuf"))}
    version = _loaded_by("--version")
    assert not {m for m in version if m.startswith(("typer", "kubedevice.cli_group", "typing"))}


def test_status_and_pods_load_neither_grpc_nor_the_daemon_nor_tables_to_fail() -> None:
    root = Path("/nonexistent-kubedevice-root")
    for command, module in (
        ("status", "kubedevice.client.cli"),
        ("pods", "kubedevice.client.cli"),
        ("claims", "kubedevice.client.cli"),
    ):
        loaded = _loaded_by(command, "--root-dir", str(root))
        assert module in loaded
        heavy = ("grpc", "google.protobuf", "rich", "kubedevice.checkpoint", "kubedevice.topology")
        assert not {
            m for m in loaded if m.startswith((*heavy, "kubedevice.manager", "kubedevice.node.config"))
        }


def test_the_command_list_says_what_each_tool_says_of_itself() -> None:
    """`kubedevice --help` lists each tool from a table, without importing it: the table must not drift."""
    import typer.main

    from kubedevice.cli_group import app
    from kubedevice.tools import SUBCOMMANDS

    group = typer.main.get_command(app)
    ctx = group.make_context("kubedevice", ["--help"], resilient_parsing=True)
    for name, entry in SUBCOMMANDS.items():
        command = group.get_command(ctx, name)
        assert command is not None and command.help is not None, name
        assert command.help.split("\n\n")[0].replace("\n", " ") == entry.summary, name


#: Run as `python -c PROBE ROOT`: `kubedevice node --root-dir ROOT`, which prints the modules loaded when
#: kubelet.sock is served (an audit hook sees the chmod that follows serving it) and ends there.
NODE_SERVING_PROBE = """
import os, sys
def hook(event, args):
    if event == "os.chmod" and str(args[0]).endswith("device-plugins/kubelet.sock"):
        print(" ".join(sorted(sys.modules)), flush=True)
        os._exit(0)
sys.addaudithook(hook)
sys.argv = ["kubedevice", "node", "--root-dir", sys.argv[1], "--log-level", "warning"]
from kubedevice.cli import run
run()
"""

#: What only serves after kubelet.sock: pods (manifests, pod sync, the state file), PodResources, the status
#: API and its views, metrics, the plugin watcher; and what `kubedevice node` never needs.
LOADED_AFTER_SERVING = (
    "prometheus_client",
    "http.server",
    "rich",
    "yaml",
    "kubedevice.api.podresources",
    "kubedevice.api.pluginregistration",
    "kubedevice.pluginwatcher.watcher",
    "kubedevice.watch",
    "kubedevice.node.admission",
    "kubedevice.statusapi.http",
    "kubedevice.node.manifest_folder",
    "kubedevice.node.manifests",
    "kubedevice.node.metrics",
    "kubedevice.node.pod_sync",
    "kubedevice.node.podresources",
    "kubedevice.node.state",
    "kubedevice.node.views",
    "kubedevice.plugin.",
    "kubedevice.conformance",
)


def test_node_serves_kubelet_sock_before_loading_what_only_serving_needs(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", NODE_SERVING_PROBE, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    loaded = set(out.stdout.split())
    assert {"kubedevice.node.daemon", "kubedevice.manager.manager", "kubedevice.checkpoint"} <= loaded
    assert not {m for m in loaded if m.startswith(LOADED_AFTER_SERVING)}, out.stdout
    assert "kubedevice.plugin" not in loaded


def test_help_lists_every_tool() -> None:
    out = subprocess.run([KUBEDEVICE, "--help"], capture_output=True, text=True, check=True)
    for command in ("checkpoint", "conformance", "demo", "node", "plugin", "podresources", "pods", "status"):
        assert command in out.stdout


def test_usage_errors_of_any_tool_are_one_line_with_exit_2() -> None:
    for args, fragment in (
        (
            ["podresources", "get"],
            "error: podresources get: Missing argument 'NAME' — see 'kubedevice podresources",
        ),
        (
            ["node", "--stop-grace-period"],
            "error: node: Option '--stop-grace-period' requires an argument — see",
        ),
        (["checkpoint", "verify"], "error: checkpoint verify: Missing argument 'PATH' — see"),
        (["--bogus"], "error: kubedevice: No such option: --bogus — see 'kubedevice --help'"),
        (["nosuch"], "error: kubedevice: No such command 'nosuch' — see 'kubedevice --help'"),
        (
            ["conformance", "--restarts", "-1", "--", "true"],
            "error: conformance: --restarts must be 0 or more",
        ),
        (["plugin", "fake", "--resource", "widget", "--devices", "1"], "error: plugin fake: resource name"),
    ):
        out = subprocess.run([KUBEDEVICE, *args], capture_output=True, text=True)
        assert out.returncode == 2, args
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(fragment), out.stderr


def test_help_shows_defaults_plain_flags_and_placeholders() -> None:
    out = subprocess.run([KUBEDEVICE, "node", "--help"], capture_output=True, text=True, check=True).stdout
    assert "[default: 5m]" in out and "[default: 30s]" in out
    assert "/kubedevice" in out.split("--root-dir", 1)[1].split("--pod-manifest-path")[0]  # resolved folder
    assert "--root-dir PATH" in out and "--allow-symlinks " in out and "<bool>" not in out
    for args in (["pods", "--help"], ["checkpoint", "inspect", "--help"], ["podresources", "get", "--help"]):
        text = subprocess.run([KUBEDEVICE, *args], capture_output=True, text=True, check=True).stdout
        assert "<" not in text.split("Options:")[1] or "--json  " in text, text
        assert "{" not in text.splitlines()[0], text  # usage placeholders read PATH, never {PATH}
    pods = subprocess.run([KUBEDEVICE, "pods", "--help"], capture_output=True, text=True, check=True).stdout
    assert "--json " in pods and "--json <bool>" not in pods
