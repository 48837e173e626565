"""Shared by the DRA document tests: a stand-in CEL compiler and small document builders."""

from kubedevice.node.manifests import parse_file
from kubedevice.resource.model import SelectorCompileError


class NoDoubleBang:
    """A stand-in CEL compiler: refuses any expression holding `!!`, records what it saw."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def compile(self, expression: str) -> None:
        self.seen.append(expression)
        if "!!" in expression:
            raise SelectorCompileError("ERROR: <input>:1:1: Syntax error:\n  mismatched input '!!'")


def one(text: str, compiler: NoDoubleBang | None = None, file: str = "f.yaml") -> object:
    parsed = parse_file(file, text.encode(), file, compiler)
    [doc] = [*parsed.pods, *parsed.dra]
    return doc


def claim_text(requests: str, extra: str = "", version: str = "v1") -> str:
    return (
        f"apiVersion: resource.k8s.io/{version}\nkind: ResourceClaim\nmetadata: {{name: c1}}\n"
        f"spec:\n  devices:\n    requests: {requests}\n{extra}"
    )
