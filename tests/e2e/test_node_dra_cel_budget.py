"""A selector over CEL's runtime cost budget, through the daemon: the pod waits Unschedulable with the
scheduler's words and is tried again; a valid pod beside it runs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.node_dra_helpers import GPU_CLASS, DRANodeProcesses, claim_yaml, dra_node_processes, pod_yaml
from tests.node_helpers import wait_for

#: 200 x 200 comprehension iterations: past the budget on every device.
ITEMS = "[" + ", ".join(["1"] * 200) + "]"
COSTLY = f"{ITEMS}.all(x, {ITEMS}.all(y, x == y))"
TEXT = (
    "claim default/costly: selector #0 on device gpu.example.com/node-1/gpu-0: CEL runtime error: "
    "operation cancelled: actual cost limit exceeded"
)


@pytest.fixture
def node() -> Iterator[DRANodeProcesses]:
    yield from dra_node_processes()


def test_a_selector_over_the_cost_budget_leaves_its_pod_unschedulable_and_others_run(
    node: DRANodeProcesses,
) -> None:
    node.start_daemon()
    node.start_dra_plugin()
    exactly = f"{{deviceClassName: gpu, selectors: [{{cel: {{expression: '{COSTLY}'}}}}]}}"
    costly = claim_yaml("costly", None).replace("{deviceClassName: gpu}", exactly)
    node.write_manifest("claims.yaml", "---\n".join([GPU_CLASS, costly, claim_yaml("fine", None)]))
    node.write_manifest("costly.yaml", pod_yaml("costly", "costly"))
    node.write_manifest("fine.yaml", pod_yaml("fine", "fine"))

    pod = node.wait_message("costly", TEXT)
    assert (pod["phase"], pod["reason"], pod["message"]) == ("Pending", "Unschedulable", TEXT)
    node.wait_phase("fine", "Running")
    # Still waiting after the next try (the valid pod's allocation changed the store), never crashed.
    wait_for(lambda: "admitted: Running" in node.log("daemon"), "the valid pod's admission to be logged")
    assert (node.pod("costly") or {}).get("reason") == "Unschedulable"
    log = (node.root / "daemon.log").read_text()
    assert "crashed" not in log and "Traceback" not in log
    said = [line for line in log.splitlines() if "pod default/costly (" in line and " waits: " in line]
    assert len(said) == 1 and said[0].endswith(TEXT)
