"""docs/sdk.md is a fresh render of the plugin SDK's docstrings, and names every public name of the SDK."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

import kubedevice.plugin
import kubedevice.plugin.cdi
import kubedevice.plugin.dra

ROOT = Path(__file__).resolve().parents[2]


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_sdk_doc", ROOT / "tools" / "gen_sdk_doc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


GEN = _load_generator()


def test_the_committed_page_is_a_fresh_render() -> None:
    committed = (ROOT / "docs" / "sdk.md").read_text(encoding="utf-8")
    assert committed == GEN.render(), "docs/sdk.md is stale: run `make docs`"


def test_every_public_name_of_the_sdk_has_a_section() -> None:
    packages = (kubedevice.plugin, kubedevice.plugin.cdi, kubedevice.plugin.dra)
    public = {name for package in packages for name in package.__all__}
    assert GEN.documented_names() == public
    page = (ROOT / "docs" / "sdk.md").read_text(encoding="utf-8")
    headings = {
        line.split("`")[1].split("(")[0].split(" ")[0]
        for line in page.splitlines()
        if line.startswith("### `")
    }
    assert public <= headings, sorted(public - headings)


def test_every_hook_says_when_it_is_called_and_what_it_returns() -> None:
    page = (ROOT / "docs" / "sdk.md").read_text(encoding="utf-8")
    for hook in (
        "devices",
        "watch_devices",
        "allocate",
        "preferred_allocation",
        "pre_start_container",
        "cdi_spec",
    ):
        [section] = [
            s for s in page.split("\n#### ") if s.startswith(f"`async {hook}(") or s.startswith(f"`{hook}(")
        ]
        assert "call" in section.lower() or "iterates" in section, hook
        assert "return" in section.lower() or "yield" in section.lower(), hook


@dataclass(frozen=True)
class Undocumented:
    """A class whose field has no comment."""

    bare: int = 0


def test_a_public_name_without_words_stops_the_render() -> None:
    with pytest.raises(GEN.MissingDoc, match=r"Undocumented.bare has no #: comment"):
        GEN.render_class(Undocumented, "Undocumented", Path(__file__))
    with pytest.raises(GEN.MissingDoc, match="f has no docstring"):
        GEN.render_function("f", lambda: None, "###", "f")


def test_the_tool_writes_the_page_where_asked(tmp_path: Path) -> None:
    assert GEN.main(["--output", str(tmp_path / "sdk.md")]) == 0
    assert (tmp_path / "sdk.md").read_text(encoding="utf-8") == GEN.render()
