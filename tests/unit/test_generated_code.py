"""The committed generated modules must be exactly what `make proto` produces from the .proto sources."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERATED_SUFFIXES = ("api_pb2.py", "api_pb2.pyi", "api_pb2_grpc.py", "api_pb2_grpc.pyi")


def _load_generator() -> object:
    spec = importlib.util.spec_from_file_location("gen_proto", ROOT / "tools" / "gen_proto.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_modules_equal_a_fresh_generation(tmp_path: Path) -> None:
    gen = _load_generator()
    gen.generate(tmp_path)  # type: ignore[attr-defined]
    fresh = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert len(fresh) == 4 * len(gen.PROTOS)  # type: ignore[attr-defined]
    for rel in fresh:
        committed = ROOT / "src" / rel
        assert committed.exists(), f"{rel} is not committed; run `make proto`"
        assert committed.read_bytes() == (tmp_path / rel).read_bytes(), f"{rel} is stale; run `make proto`"
    committed_all = sorted(
        p.relative_to(ROOT / "src")
        for p in (ROOT / "src" / "kubedevice" / "api").rglob("api_pb2*")
        if p.name in GENERATED_SUFFIXES
    )
    assert committed_all == fresh, "generated modules without a .proto source"
