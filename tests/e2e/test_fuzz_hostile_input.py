"""The fuzz suite of hostile input (issue 35, docs/bad-inputs.md "The fuzz suite"): one real node daemon
process, with a device plugin and a DRA driver, is fed batches of mutated manifests and ResourceSlices
(tests/fuzz_documents.py), files past every reading limit, and special files (a FIFO, a socket, a symlink
to /dev/zero, a folder, a symlink loop, a broken symlink, an unreadable file, /proc/self/mem) in both
folders, beside valid pods. After each batch:

- every status answer came within ANSWER_S (a stall detector in the suite, 1 s in the long run; each
  answer timed, the slowest kept for the figures);
- the daemon's peak memory (VmHWM of /proc/<pid>/status) is under MEMORY_BOUND_MIB;
- the valid pods written beside the bad files are Running, and the pods before them still are;
- each manifest file is what reading it alone says (the oracle: `parse_file`, which must raise nothing but
  ManifestError): its one line in `manifestErrors`, or its pods listed; the slice folder's reports are
  those of reading the folder alone (`read_slices`), none an unexpected failure; each special file has its
  own line; each line is in the daemon's log exactly once, and the log has no traceback;
- `kubedevice pods` prints every bad file's line, escaped, without a traceback;
- after a SIGKILL and a restart, every pod that was Running is Running with the same devices (device
  plugin devices, DRA claims and CDI devices), and the manifest folder's lines are the same.

The size is KUBEDEVICE_FUZZ_EXAMPLES documents (240 by default: six batches); hypothesis draws them
derandomized, so every run is the same, unless KUBEDEVICE_FUZZ_SEED asks for other ones. A long run prints
its figures at the end:

    KUBEDEVICE_FUZZ_EXAMPLES=3000 KUBEDEVICE_FUZZ_ANSWER_S=1 \
        .venv/bin/python -m pytest -s tests/e2e/test_fuzz_hostile_input.py
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from kubedevice.controlplane.slice_pools import read_slices
from kubedevice.logs import escaped
from kubedevice.node.manifests import parse_file
from kubedevice.resource.document_file import ManifestError
from kubedevice.scheduler.cel import CelSelectors
from kubedevice.statusapi.client import StatusClient, StatusClientError
from tests.fuzz_documents import (
    FuzzFile,
    hostile_contents,
    manifest_files,
    slice_files,
    valid_pod,
    valid_slice,
)
from tests.node_dra_helpers import DRIVER, GPU_CLASS, NODE, DRANodeProcesses, claim_yaml, pod_yaml
from tests.node_helpers import CLI, pod_manifest, short_tmpdir
from tests.waiting import poll

GPU = "example.com/gpu"
#: Documents per run (KUBEDEVICE_FUZZ_EXAMPLES); files per batch: manifests and slice files (of one to
#: three documents each).
DOCUMENTS = int(os.environ.get("KUBEDEVICE_FUZZ_EXAMPLES", "240"))
#: Draws other documents than the fixed ones (KUBEDEVICE_FUZZ_SEED, a number): a run to explore with.
SEED = os.environ.get("KUBEDEVICE_FUZZ_SEED")
MANIFESTS_PER_BATCH, SLICES_PER_BATCH = 14, 6
BATCHES = max(1, math.ceil(DOCUMENTS / (2 * (MANIFESTS_PER_BATCH + SLICES_PER_BATCH))))
#: The costliest documents within the limits (tests/fuzz_documents.py `_WIDE`: seconds to read, here and
#: in the daemon) in every tenth batch: a long run's.
WIDE_EVERY = 10
#: Each status answer must come within this (KUBEDEVICE_FUZZ_ANSWER_S). In the suite it is a stall detector,
#: not a speed test (the hazards it guards against stalled the status API for 90 s and more; a loaded shared
#: machine must not fail it): 5 s. The long run, on a quiet machine, holds the daemon to 1 s
#: (KUBEDEVICE_FUZZ_ANSWER_S=1, docs/bad-inputs.md), and every run prints the slowest answer.
ANSWER_S = float(os.environ.get("KUBEDEVICE_FUZZ_ANSWER_S", "5"))
#: The daemon's peak resident memory. It starts at about 75 MiB. What is read is bounded per file (3 MiB)
#: and per document (1.5 MiB, 100 levels, go-yaml's alias rule); files are read one at a time in each of
#: the two reading threads (manifests, slices), and nothing of a refused file is kept. The costliest
#: document within the limits (700,000 nodes in 1.4 MB) takes about 300 MiB while it is read (libyaml's
#: nodes), freed after; what a batch leaves (pods, claims, slices) is a few MiB. 75 + 2 x 300, rounded up.
MEMORY_BOUND_MIB = 700
#: How long a batch may take to settle: a generous upper bound on a loaded 2-core machine.
SETTLE_S = 90.0


@dataclass
class Figures:
    documents: int = 0
    files: int = 0
    batches: int = 0
    restarts: int = 0
    slowest_answer_s: float = 0.0
    slowest_answer_path: str = ""
    peak_memory_kib: int = 0
    started: float = field(default_factory=time.monotonic)

    def line(self) -> str:
        return (
            f"fuzz: {self.documents} documents in {self.files} files, {self.batches} batches, "
            f"{self.restarts} SIGKILL restarts, {time.monotonic() - self.started:.0f} s; daemon peak memory "
            f"(VmHWM) {self.peak_memory_kib / 1024:.0f} MiB (bound {MEMORY_BOUND_MIB} MiB); slowest status "
            f"answer {self.slowest_answer_s * 1000:.0f} ms ({self.slowest_answer_path})"
        )


class FuzzNode:
    """The daemon under fuzz: every status answer timed, its log read per run (a restart starts one)."""

    def __init__(self, node: DRANodeProcesses) -> None:
        self.node = node
        self.figures = Figures()
        self.log_start = 0
        self.batch = 0
        #: Files of the batch before, removed when the next one is written.
        self.leftovers: list[Path] = []
        self.sockets: list[socket.socket] = []
        self.compiler = CelSelectors()

    def get(self, path: str) -> Any:
        """The JSON answer to `path`; each call timed, and it must come within ANSWER_S."""
        began = time.perf_counter()
        try:
            body = asyncio.run(StatusClient(self.node.paths.status_socket, wait=ANSWER_S).get(path))
        except StatusClientError:
            body = None
        took = time.perf_counter() - began
        if took > self.figures.slowest_answer_s:
            self.figures.slowest_answer_s, self.figures.slowest_answer_path = took, path
        assert took < ANSWER_S, f"the status API took {took:.2f} s to answer {path}"
        assert body is not None, f"the status API did not answer {path}: {self.node.log('daemon')}"
        return json.loads(body)

    def pods(self) -> list[dict[str, Any]]:
        return list(self.get("/pods")["pods"])

    def manifest_errors(self) -> dict[str, str]:
        return {e["file"]: e["error"] for e in self.get("/pods")["manifestErrors"]}

    def start(self) -> None:
        log = self.node.root / "daemon.log"
        self.log_start = log.stat().st_size if log.exists() else 0
        self.node.start_daemon()

    def log(self) -> str:
        """This run's log (since the last start)."""
        with open(self.node.root / "daemon.log", "rb") as f:
            f.seek(self.log_start)
            return f.read().decode(errors="replace")

    def peak_memory(self) -> int:
        """The daemon's VmHWM in KiB; the highest is kept for the figures."""
        assert self.node.daemon is not None
        status = Path(f"/proc/{self.node.daemon.pid}/status").read_text()
        hwm = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))
        self.figures.peak_memory_kib = max(self.figures.peak_memory_kib, hwm)
        return hwm

    def put(self, folder: Path, name: str, content: bytes, mode: int | None = None) -> None:
        """Written whole: a temporary file renamed into place, so the daemon never reads half of it."""
        tmp = folder / f".tmp-{self.batch}"
        tmp.write_bytes(content)
        if mode is not None:
            tmp.chmod(mode)
        os.replace(tmp, folder / name)
        self.leftovers.append(folder / name)

    def remove_leftovers(self) -> None:
        for s in self.sockets:
            s.close()
        self.sockets.clear()
        for path in self.leftovers:
            if path.is_dir() and not path.is_symlink():
                for inner in path.iterdir():
                    inner.unlink()
                path.rmdir()
            elif path.is_symlink() or path.exists():
                path.unlink()
        self.leftovers.clear()

    def special_files(self, folder: Path, tag: str, *, slices: bool) -> dict[str, str]:
        """What is no manifest file, made in `folder` itself: each name and the one line it gets."""

        # Some named as a careless or hostile user names them: a terminal escape, rich markup, a newline,
        # a byte that is not UTF-8.
        hostile = {"fifo": "\x1b[31m", "folder": "[bold]", "unreadable": "\udcff\n"}

        def name(what: str) -> str:
            return f"f-{tag}-{what}{hostile.get(what, '')}.yaml"

        made: dict[str, str] = {}
        os.mkfifo(folder / name("fifo"))
        made[name("fifo")] = "not a regular file (a FIFO)"
        listening = socket.socket(socket.AF_UNIX)
        listening.bind(str(folder / name("socket")))
        listening.listen()
        self.sockets.append(listening)
        made[name("socket")] = "not a regular file (a socket)"
        os.symlink("/dev/zero", folder / name("zero"))
        made[name("zero")] = (
            "not a regular file (a character device)"
            if slices
            else "symlink to /dev/zero points outside the manifest folder (see --allow-symlinks)"
        )
        (folder / name("folder")).mkdir()
        (folder / name("folder") / "inside.yaml").write_text(pod_manifest(f"{tag}-inside", {GPU: 1}))
        made[name("folder")] = "not a regular file (a directory)"
        os.symlink(name("loop"), folder / name("loop"))
        made[name("loop")] = "cannot read: Too many levels of symbolic links"
        os.symlink(name("missing"), folder / name("broken"))
        made[name("broken")] = (
            f"symlink to {os.path.realpath(folder / name('missing'))}, which does not exist"
        )
        if slices:
            # The daemon's own memory: a regular file of /proc whose read fails (at address 0).
            os.symlink("/proc/self/mem", folder / name("mem"))
            made[name("mem")] = "cannot read: Input/output error"
        self.leftovers.extend(folder / n for n in made)
        # Unreadable, but for root, who reads what is in it: not YAML.
        self.put(folder, name("unreadable"), b"kind: [\n", mode=0)
        made[name("unreadable")] = (
            "YAML error at the end of the file: expected the node content, but found '<stream end>'"
            if os.geteuid() == 0
            else "cannot read: Permission denied"
        )
        return made

    def manifest_line(self, name: str, content: bytes) -> tuple[int, str | None]:
        """(pods, None) for a file the daemon takes, (0, its line) for one it refuses: `parse_file`, which
        must raise nothing but ManifestError (anything else is a bug, whatever the folder makes of it)."""
        try:
            parsed = parse_file(name, content, name, self.compiler)
        except ManifestError as err:
            return 0, str(err)
        return len(parsed.pods), None


@pytest.fixture(scope="module")
def fuzz() -> Iterator[FuzzNode]:
    node = DRANodeProcesses(short_tmpdir("kd-fuzz-"))
    fuzz = FuzzNode(node)
    try:
        fuzz.start()
        node.start_plugin(GPU, 16)
        node.wait_capacity(GPU, 16, 16)
        node.start_dra_plugin(devices=8)
        node.write_manifest("a-0-class.yaml", GPU_CLASS)
        node.write_manifest("a-0-anchor.yaml", pod_manifest("anchor", {GPU: 1}))
        node.write_manifest(
            "a-0-anchor-dra.yaml",
            claim_yaml("anchor-claim", None) + "---\n" + pod_yaml("anchor-dra", "anchor-claim"),
        )
        node.wait_phase("anchor", "Running")
        node.wait_phase("anchor-dra", "Running")
        yield fuzz
        print("\n" + fuzz.figures.line())
    finally:
        fuzz.remove_leftovers()
        node.close()


# ----------------------------------------------------------------------------------------------------
# One batch


def _valid_files(batch: int) -> dict[str, str]:
    """The valid pods written beside each batch's bad files: device plugin, claim, claim template. Their
    files come first in name order, as the first file defining a DRA document wins."""
    b = f"ok{batch}"
    template = (
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
        f"metadata: {{name: {b}-t}}\nspec:\n  spec:\n    devices:\n      requests:\n"
        "      - {name: gpu, exactly: {deviceClassName: gpu}}\n"
    )
    templated = (
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {b}-tmpl}}\nspec:\n"
        f"  resourceClaims: [{{name: g, resourceClaimTemplateName: {b}-t}}]\n"
        "  containers:\n  - name: main\n    resources: {claims: [{name: g}]}\n"
    )
    return {
        f"a-{batch}-dp.yaml": pod_manifest(f"{b}-dp", {GPU: 1}),
        f"a-{batch}-claim.yaml": claim_yaml(f"{b}-c", None) + "---\n" + pod_yaml(f"{b}-claim", f"{b}-c"),
        f"a-{batch}-tmpl.yaml": template + "---\n" + templated,
    }


@dataclass
class Batch:
    """What one batch wrote and what the daemon must say of it."""

    #: Manifest file -> (its pods, None) or (0, its line).
    manifests: dict[str, tuple[int, str | None]] = field(default_factory=dict)
    #: Special file -> its line, in each folder.
    specials: dict[str, str] = field(default_factory=dict)
    slice_specials: dict[str, str] = field(default_factory=dict)
    #: (file, slice, message) of every report of the slice folder read alone.
    slice_reports: set[tuple[str, str, str]] = field(default_factory=set)
    valid_pods: list[str] = field(default_factory=list)


def write_batch(fuzz: FuzzNode, manifests: list[FuzzFile], slices: list[FuzzFile]) -> Batch:
    fuzz.batch += 1
    n, figures = fuzz.batch, fuzz.figures
    fuzz.remove_leftovers()
    folder, slice_folder = fuzz.node.paths.manifests, fuzz.node.paths.resourceslices
    batch = Batch(valid_pods=[f"ok{n}-dp", f"ok{n}-claim", f"ok{n}-tmpl"])
    for name, text in _valid_files(n).items():
        fuzz.put(folder, name, text.encode())
    contents = hostile_contents(valid_pod(), wide=n % WIDE_EVERY == 0)
    for i, f in enumerate([*manifests, *(f for f, _ in contents)]):
        f = f.tagged(f"fz{n}x{i}")
        batch.manifests[f.name] = fuzz.manifest_line(f.name, f.content)
        fuzz.put(folder, f.name, f.content)
    # The hostile contents' lines as docs/bad-inputs.md words them: the oracle is not the only judge.
    for (f, line), name in zip(contents, list(batch.manifests)[len(manifests) :], strict=True):
        pods, got = batch.manifests[name]
        assert line in (got or "") if line else (pods, got) == (1, None), (f.made, got)
    batch.specials = fuzz.special_files(folder, f"fz{n}s", slices=False)
    slice_contents = [f for f, _ in hostile_contents(valid_slice(NODE), wide=False)]
    for i, f in enumerate([*slices, *slice_contents]):
        f = f.tagged(f"fs{n}x{i}")
        fuzz.put(slice_folder, f.name, f.content)
    batch.slice_specials = fuzz.special_files(slice_folder, f"fs{n}s", slices=True)
    alone = read_slices(slice_folder, NODE)
    batch.slice_reports = {(r.file, r.slice, r.message) for r in (*alone.errors, *alone.warnings)}
    # A file's unexpected failure is caught and worded so (slice_pools.parse_slice_file): a bug all the same.
    assert not [r for r in batch.slice_reports if "cannot be read: " in r[2]], "an unexpected failure"
    figures.batches += 1
    figures.documents += sum(f.documents for f in (*manifests, *slices)) + len(contents) + len(slice_contents)
    figures.files += len(batch.manifests) + len(batch.specials) + len(slices) + len(slice_contents)
    figures.files += len(batch.slice_specials) + len(_valid_files(n))
    return batch


def _settled(what: str, check: Callable[[], str | None]) -> None:
    """Poll `check` (None once settled, else what is still missing) until it holds; fail with the last
    thing missing."""
    missing: list[str | None] = [None]

    def done() -> bool:
        missing[0] = check()
        return missing[0] is None

    try:
        poll(done, what, SETTLE_S, interval=0.1)
    except AssertionError as err:
        raise AssertionError(f"{err}: {missing[0]}") from None


def manifests_settled(fuzz: FuzzNode, batch: Batch) -> str | None:
    answer = fuzz.get("/pods")
    errors = {e["file"]: e["error"] for e in answer["manifestErrors"]}
    listed: dict[str, int] = {}
    for p in answer["pods"]:
        listed[p["file"]] = listed.get(p["file"], 0) + 1
    for name, (pods, line) in batch.manifests.items():
        got = errors.get(name)
        if line is not None and got != line:
            return f"{name!r}: expected {line!r}, the daemon says {got!r}"
        # Taken alone, it may still clash with another file's document of the same name.
        if line is None and got is not None and "is already defined by" not in got:
            return f"{name!r}: taken alone, but the daemon says {got!r}"
        if line is None and got is None and listed.get(name, 0) != pods:
            return f"{name!r}: {pods} pods expected, {listed.get(name, 0)} listed"
    for name, line in batch.specials.items():
        if errors.get(name) != line:
            return f"{name!r}: expected {line!r}, the daemon says {errors.get(name)!r}"
    for name in [*batch.valid_pods, "anchor", "anchor-dra"]:
        pod = next((p for p in answer["pods"] if p["name"] == name), None)
        if pod is None or pod["phase"] != "Running":
            return f"valid pod {name}: {pod and (pod['phase'], pod['reason'], pod['message'])}"
    return None


def _slice_reports(answer: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(file, slice, message) of every report `/resourceslices` shows."""
    found = {(e["file"], "", e["error"]) for e in answer["fileErrors"]}
    found |= {(s["file"], s["name"], s["error"]) for s in answer["resourceSlices"] if s["error"]}
    return found


def slices_settled(fuzz: FuzzNode, batch: Batch) -> str | None:
    answer = fuzz.get("/resourceslices")
    reports = _slice_reports(answer)
    if reports != batch.slice_reports:
        extra, missing = sorted(reports - batch.slice_reports)[:3], sorted(batch.slice_reports - reports)[:3]
        return f"slice reports: only the daemon's {extra}, only read alone {missing}"
    for name, line in batch.slice_specials.items():
        if (name, "", line) not in reports:
            return f"slice file {name!r}: expected {line!r}"
    if not any(s["driver"] == DRIVER for s in answer["resourceSlices"]):
        return "the DRA driver's own slice"
    return None


def check_log(fuzz: FuzzNode, batch: Batch, errors: dict[str, str]) -> None:
    """No traceback or failure of the daemon's own in this run's log, and each file's line exactly once."""
    log = fuzz.log()
    assert "Traceback" not in log, log[log.index("Traceback") - 2000 :][:6000]
    for bad in (
        "crashed",
        "failed, tried again",
        "read again later",
        "stopped (",
        "internal error",
        "never retrieved",
    ):
        assert bad not in log, [line for line in log.splitlines() if bad in line][:5]
    lines = [
        f"manifest {name}: {errors[name]}" for name in [*batch.manifests, *batch.specials] if name in errors
    ]
    lines += [f"ResourceSlice file {file}: {message}" for file, _, message in batch.slice_reports]
    counts = {line: log.count(escaped(line) + "\n") for line in lines}
    assert {line: n for line, n in counts.items() if n != 1} == {}, "lines not logged exactly once"


def check_pods_command(fuzz: FuzzNode, errors: dict[str, str]) -> None:
    """`kubedevice pods` prints each bad file's line, its control characters and markup escaped."""
    done = subprocess.run(
        [*CLI, "pods", "--root-dir", str(fuzz.node.root)],
        capture_output=True,
        timeout=60,
        check=False,
        env={**os.environ, "COLUMNS": "100000"},
    )
    assert (done.returncode, done.stderr) == (0, b""), done.stderr.decode(errors="replace")[-3000:]
    out = done.stdout.decode()  # UTF-8: no lone surrogate reaches the terminal
    assert "\x1b" not in out
    for name, error in errors.items():
        assert f"bad manifest {escaped(name)}: {escaped(error)}\n" in out, name


def check_restart(fuzz: FuzzNode, errors: dict[str, str]) -> None:
    """SIGKILL and a restart: every Running pod keeps its devices, the manifest lines are the same."""

    def running() -> dict[tuple[str, str, str], Any]:
        return {
            (p["namespace"], p["name"], p["uid"]): [
                (c["name"], c["devices"], c["claims"], c["cdiDevices"]) for c in p["containers"]
            ]
            for p in fuzz.pods()
            if p["phase"] == "Running"
        }

    before = running()
    fuzz.node.kill_daemon(signal.SIGKILL)
    fuzz.start()
    fuzz.figures.restarts += 1

    def restored() -> str | None:
        now = running()
        lost = {key: (held, now.get(key)) for key, held in before.items() if now.get(key) != held}
        return f"Running pods changed (before, now): {lost}" if lost else None

    _settled("the Running pods after a SIGKILL", restored)
    _settled(
        "the manifest lines after a SIGKILL", lambda: None if fuzz.manifest_errors() == errors else "differ"
    )


def run_batch(fuzz: FuzzNode, manifests: list[FuzzFile], slices: list[FuzzFile]) -> None:
    batch = write_batch(fuzz, manifests, slices)
    _settled(f"batch {fuzz.batch}'s manifests", lambda: manifests_settled(fuzz, batch))
    _settled(f"batch {fuzz.batch}'s slices", lambda: slices_settled(fuzz, batch))
    errors = fuzz.manifest_errors()
    assert fuzz.peak_memory() < MEMORY_BOUND_MIB * 1024, f"peak memory {fuzz.figures.peak_memory_kib} KiB"
    check_log(fuzz, batch, errors)
    check_pods_command(fuzz, errors)
    check_restart(fuzz, errors)
    assert fuzz.peak_memory() < MEMORY_BOUND_MIB * 1024
    check_log(fuzz, Batch(), {})


@seed(int(SEED or 0))
@settings(
    max_examples=BATCHES,
    derandomize=SEED is None,
    database=None,
    deadline=None,
    # Each example is one batch against the running daemon: a failure is reported as it is, not shrunk.
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)
@given(
    manifests=st.lists(manifest_files(), min_size=MANIFESTS_PER_BATCH, max_size=MANIFESTS_PER_BATCH),
    slices=st.lists(slice_files(NODE), min_size=SLICES_PER_BATCH, max_size=SLICES_PER_BATCH),
)
def test_hostile_batches_leave_the_daemon_answering_and_nothing_lost(
    fuzz: FuzzNode, manifests: list[FuzzFile], slices: list[FuzzFile]
) -> None:
    run_batch(fuzz, manifests, slices)


pytestmark = pytest.mark.timeout(max(120, 60 * BATCHES))
