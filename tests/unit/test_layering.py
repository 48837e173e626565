"""The tree's layering (docs/architecture.md, "Layout"): each package imports only the layers below it (or
its own), the scheduler only the resource objects, the SDK never the daemon, and no module import circle.

Imports are read from the source with the ast module, those inside functions and under TYPE_CHECKING
included: a late import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kubedevice

ROOT = Path(kubedevice.__file__).parent

#: From the bottom up; a package may import its own layer and the ones before it.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset(
        {
            "api",
            "checkpoint",
            "durable",
            "grpc_unix",
            "backoff",
            "cdi_names",
            "console",
            "wording",
            "tasks",
            "watch",
            "metrics",
            "logs",
            "options",
            "durations",
            "ratelimit",
            "tools",
        }
    ),
    frozenset({"resource"}),
    frozenset({"scheduler"}),
    frozenset({"manager", "topology", "dra", "pluginwatcher"}),
    frozenset({"controlplane"}),
    frozenset({"statusapi"}),
    frozenset({"node"}),
    frozenset(
        {"plugin", "inventory", "client", "conformance", "testing", "exporter", "top", "cli", "cli_group"}
    ),
)


def _layer(package: str) -> int:
    if not package:  # the package's own face (`__version__`)
        return 0
    for i, layer in enumerate(LAYERS):
        if package in layer:
            return i
    raise AssertionError(f"kubedevice.{package} is in no layer of tests/unit/test_layering.py: place it")


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = ("kubedevice", *rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The kubedevice modules `path` imports (a `from package import name` of a submodule counts as that
    submodule)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("kubedevice."))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if not node.module.startswith("kubedevice"):
                continue
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in modules else node.module)
    return {m for m in found if m in modules}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, modules) - {name} for name, path in modules.items()}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_each_package_imports_only_its_layer_and_those_below() -> None:
    wrong = []
    for module, imported in _graph().items():
        if module == "kubedevice":
            continue
        own = _layer(_package(module))
        for target in imported:
            if _layer(_package(target)) > own:
                wrong.append(f"{module} imports {target}")
    assert wrong == []


def test_the_scheduler_imports_only_the_resource_objects() -> None:
    wrong = [
        f"{m} imports {t}"
        for m, imported in _graph().items()
        if _package(m) == "scheduler"
        for t in imported
        if _package(t) not in ("scheduler", "resource")
    ]
    assert wrong == []


def test_the_sdk_never_imports_the_daemon_or_the_control_plane() -> None:
    wrong = [
        f"{m} imports {t}"
        for m, imported in _graph().items()
        if _package(m) == "plugin"
        for t in imported
        if _package(t) in ("node", "controlplane", "scheduler", "manager", "dra")
    ]
    assert wrong == []


def test_no_import_circle() -> None:
    graph = _graph()
    # Tarjan's strongly connected components: a component of more than one module is a circle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert circles == []
