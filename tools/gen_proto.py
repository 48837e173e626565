"""Regenerate the Python modules of kubedevice's wire API from its .proto sources.

Run by `make proto`, and by a test that regenerates into a temporary folder and
checks the committed modules are what the pinned generators produce.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PROTOS = (
    "kubedevice/api/deviceplugin/v1beta1/api.proto",
    "kubedevice/api/podresources/v1/api.proto",
    "kubedevice/api/pluginregistration/v1/api.proto",
    "kubedevice/api/dra/v1/api.proto",
    "kubedevice/api/dra/v1beta1/api.proto",
    "kubedevice/api/drahealth/v1/api.proto",
    "kubedevice/api/drahealth/v1alpha1/api.proto",
)


def generate(out_dir: Path) -> None:
    """Write api_pb2.py, api_pb2.pyi, api_pb2_grpc.py and api_pb2_grpc.pyi for each proto under out_dir."""
    from grpc_tools import protoc

    mypy_grpc = shutil.which("protoc-gen-mypy_grpc", path=str(Path(sys.executable).parent))
    if mypy_grpc is None:
        raise SystemExit("protoc-gen-mypy_grpc not found: install the test extras (mypy-protobuf)")
    out_dir.mkdir(parents=True, exist_ok=True)
    args = [
        "grpc_tools.protoc",
        f"-I{SRC}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"--plugin=protoc-gen-mypy_grpc={mypy_grpc}",
        f"--mypy_grpc_out=quiet:{out_dir}",
        *(str(SRC / p) for p in PROTOS),
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=SRC, help="output root (default: src/)")
    out = parser.parse_args().out
    generate(out)
    for proto in PROTOS:
        stem = (out / proto).with_suffix("")
        written = [f"{stem}_pb2{suffix}" for suffix in (".py", ".pyi", "_grpc.py", "_grpc.pyi")]
        print(f"{proto}: wrote {', '.join(Path(w).name for w in written)} in {Path(written[0]).parent}")


if __name__ == "__main__":
    main()
