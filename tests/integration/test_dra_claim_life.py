"""The claim's life with the real DRA manager: claims the daemon generated, allocated and reserved are read
through ClaimView (its ClaimSource) and prepared by a raw DRA plugin over real unix sockets; unprepare
and the pod's removal then free them."""

from __future__ import annotations

import pytest

from kubedevice.controlplane.claim_view import ClaimView
from kubedevice.controlplane.reservation import pod_removed
from kubedevice.dra import ClaimNotFoundError, PrepareError
from kubedevice.dra.types import DriverClaim
from kubedevice.resource.model import DRADocuments
from tests.dra_allocator_helpers import pool
from tests.dra_life_helpers import CLASS_GPU, Node, pod_yaml, read
from tests.dra_manager_env import dra_manager_env, gpu
from tests.dra_plugin import PREPARE, UNPREPARE, Device

TEMPLATE = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: gpu-tmpl}
spec:
  spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu}}]}}
"""
EXTENDED_CLASS = CLASS_GPU.replace("spec:\n", "spec:\n  extendedResourceName: example.com/gpu\n")


async def test_template_and_extended_claims_are_prepared_and_freed() -> None:
    pods, documents = read(
        "---\n".join(
            [
                EXTENDED_CLASS,
                TEMPLATE,
                pod_yaml("p", ("gpu", "resourceClaimTemplateName", "gpu-tmpl"), limits="example.com/gpu: 1"),
            ]
        )
    )
    [p] = pods
    node = Node(documents, [pool("gpu-0", "gpu-1")])
    view = ClaimView(lambda: node.documents, node.state)
    result = node.step(p)
    assert result.ready
    template_claim = result.pod.claim_statuses["gpu"]
    special = result.pod.extended_resource_claim
    assert template_claim is not None and special is not None

    async with dra_manager_env() as env:
        env.claims = view  # type: ignore[assignment]
        await env.restart_manager()
        plugin = await env.start_plugin()

        def devices_for(ref: DriverClaim) -> list[Device]:
            claim = view.claim(ref.namespace, ref.name)
            assert claim is not None and claim.allocation is not None
            return [gpu(r.device, request=r.request) for r in claim.allocation.results]

        plugin.set_default_devices(devices_for)
        prepared = await env.manager.prepare_resources(result.pod)
        # The owner check of the template claim and the reservations pass; one call, both claims, in order.
        assert [c.name for c in prepared] == [template_claim, special.resource_claim_name]
        (call,) = plugin.calls_of(PREPARE)
        assert [c.name for c in call.claims] == [template_claim, special.resource_claim_name]
        main = result.pod.containers[0]
        # The template claim's device, then the special claim's through its request mapping.
        assert env.manager.get_resources(result.pod, main) == [
            "gpu.example.com/gpu=gpu-0",
            "gpu.example.com/gpu=gpu-1",
        ]

        await env.manager.unprepare_resources(result.pod)
        (call,) = plugin.calls_of(UNPREPARE)
        assert sorted(c.name for c in call.claims) == sorted([template_claim, special.resource_claim_name])
        assert node.state.apply(pod_removed(node.state, p.uid))
        assert node.state.records == {}
        assert view.claims() == []


async def test_claim_view_answers_as_the_api_server_would() -> None:
    pods, documents = read("---\n".join([CLASS_GPU, pod_yaml("p", ("gpu", "resourceClaimName", "c1"))]))
    node = Node(documents, [pool("gpu-0")])
    view = ClaimView(lambda: node.documents, node.state)
    waiting = node.step(pods[0]).waiting
    assert waiting is not None
    with pytest.raises(ClaimNotFoundError, match=r'^resourceclaims\.resource\.k8s\.io "c1" not found$'):
        await view.get_claim("default", "c1")
    # The same text reaches the pod through the real manager.
    async with dra_manager_env() as env:
        env.claims = view  # type: ignore[assignment]
        await env.restart_manager()
        with pytest.raises(PrepareError) as caught:
            await env.manager.prepare_resources(node.step(pods[0]).pod)
        assert waiting.message == f"Failed to prepare dynamic resources: {caught.value}"
    node.documents = DRADocuments()
    assert view.claims() == []
