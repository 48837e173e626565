"""Manifest text read into pods and DRA documents, and a small driver of the pod's DRA step, for the
claim's-life tests (library level, no processes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kubedevice.controlplane.claim_store import ClaimStore, ClaimStoreFile
from kubedevice.controlplane.extended import ExtendedRoutes, route_extended_resources
from kubedevice.controlplane.pod_step import DRAContext, StepResult, dra_step
from kubedevice.controlplane.reservation import pod_removed
from kubedevice.node.manifests import PodManifest, parse_file
from kubedevice.resource.model import (
    ClaimDocument,
    ClaimTemplateDocument,
    DeviceClassDocument,
    DRADocuments,
    NamespaceDocument,
)
from kubedevice.resource.slice_model import Pool
from kubedevice.scheduler.cel import CelSelectors
from tests.dra_allocator_helpers import NODE

CLASS_GPU = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
"""

_CEL = CelSelectors()


def read(text: str, file: str = "m.yaml") -> tuple[list[PodManifest], DRADocuments]:
    """The pods and DRA documents of one manifest file (CEL selectors compiled)."""
    parsed = parse_file(file, text.encode(), file, _CEL)
    kinds: dict[type, dict[str, object]] = {}
    for d in parsed.dra:
        kinds.setdefault(type(d), {})[d.meta.key] = d
    documents = DRADocuments(
        claims=kinds.get(ClaimDocument, {}),  # type: ignore[arg-type]
        templates=kinds.get(ClaimTemplateDocument, {}),  # type: ignore[arg-type]
        classes=kinds.get(DeviceClassDocument, {}),  # type: ignore[arg-type]
        namespaces=kinds.get(NamespaceDocument, {}),  # type: ignore[arg-type]
    )
    return parsed.pods, documents


def pod_yaml(name: str, *claims: tuple[str, str, str], limits: str = "", uid: str = "") -> str:
    """A pod whose container `main` uses each (pod claim, field, value) claim."""
    meta = f"{{name: {name}, uid: {uid}}}" if uid else f"{{name: {name}}}"
    lines = [f"apiVersion: v1\nkind: Pod\nmetadata: {meta}\nspec:"]
    if claims:
        lines.append("  resourceClaims:")
        lines += [f"  - {{name: {n}, {f}: {v}}}" for n, f, v in claims]
    lines.append("  containers:\n  - name: main\n    image: x")
    lines.append("    resources:")
    if claims:
        lines.append("      claims: [" + ", ".join(f"{{name: {n}}}" for n, _, _ in claims) + "]")
    if limits:
        lines.append(f"      limits: {{{limits}}}")
    return "\n".join(lines) + "\n"


@dataclass
class Node:
    """The daemon's DRA decisions for a set of pods, driven the way the pod flow drives them."""

    documents: DRADocuments
    pools: Sequence[Pool]
    state: ClaimStore = field(default_factory=ClaimStore)
    plugin_resources: frozenset[str] = frozenset()
    routes: dict[str, ExtendedRoutes] = field(default_factory=dict)
    file: ClaimStoreFile | None = None

    def step(self, manifest: PodManifest) -> StepResult:
        pod = manifest.pod
        if pod.uid not in self.routes:
            self.routes[pod.uid] = route_extended_resources(pod, self.plugin_resources, self.documents)
        context = DRAContext(self.documents, self.pools, NODE, selectors=_CEL)
        result = dra_step(pod, manifest.claims, self.routes[pod.uid], self.state, context)
        if self.state.apply(result.updates) and self.file is not None:
            self.file.save(self.state)
        return result

    def remove(self, manifest: PodManifest) -> None:
        self.routes.pop(manifest.uid, None)
        if self.state.apply(pod_removed(self.state, manifest.uid)) and self.file is not None:
            self.file.save(self.state)


def devices(result: StepResult, node: Node) -> dict[str, list[str]]:
    """Claim name -> its allocated devices, for every claim the pod uses."""
    out: dict[str, list[str]] = {}
    for key, record in node.state.records.items():
        if record.allocation is not None and any(r.uid == result.pod.uid for r in record.reserved_for):
            out[key.split("/", 1)[1]] = [r.device for r in record.allocation.results]
    return out


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
