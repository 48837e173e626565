"""Hypothesis strategies for hostile manifest and ResourceSlice files (issue 35, docs/bad-inputs.md "The
fuzz suite"): valid documents of every kind the daemon reads, mutated the ways a careless script, a bad
copy or a hostile user mutates them, as the bytes of one file.

Each kind starts from a document the daemon accepts. A file is one to three of them, each mutated zero to
three times in its tree (a value of the wrong type, a field deleted, a list item duplicated, a hostile
name, quantity or CEL selector, an unknown field, a deep or huge value, an anchor and its aliases, an
alias bomb, a recursive anchor) and rendered as YAML (block or flow), JSON or a `kind: List`, then maybe
mutated as text (cut short, a byte inserted that is not UTF-8, a control character, a Helm action, a
duplicated line). Its name may hold a control character, rich markup or a byte that is not UTF-8.

Every name in a file derives from the placeholder TAG, which the writer replaces with a tag of its own per
file, so no two files clash by accident. What a fuzzed document may be, once valid, is kept harmless to the
rest of the node: its pods ask for `example.com/fuzz` (which no plugin serves) and for claims of its own
DeviceClass, which selects only devices of `fuzz.example.com` (which no plugin drives).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml
from hypothesis import strategies as st

from tests.node_helpers import ALIAS_BOMB

#: Replaced by the writer with the file's own tag (ASCII letters and digits).
TAG = "fztag"
FUZZ_DRIVER = "fuzz.example.com"
FUZZ_RESOURCE = "example.com/fuzz"

Path_ = tuple[str | int, ...]

# ----------------------------------------------------------------------------------------------------
# Valid documents, one per kind

_SELECTOR = f'device.driver == "{FUZZ_DRIVER}"'


def _devices_spec() -> dict[str, Any]:
    return {
        "requests": [
            {
                "name": "gpu",
                "exactly": {
                    "deviceClassName": f"{TAG}-class",
                    "count": 1,
                    "allocationMode": "ExactCount",
                    "selectors": [
                        {"cel": {"expression": f'device.attributes["{FUZZ_DRIVER}"].model == "a"'}}
                    ],
                },
            }
        ],
        "constraints": [{"requests": ["gpu"], "matchAttribute": f"{FUZZ_DRIVER}/model"}],
        "config": [{"requests": ["gpu"], "opaque": {"driver": FUZZ_DRIVER, "parameters": {"mode": "x"}}}],
    }


def _pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": TAG, "namespace": "default", "labels": {"app": TAG}},
        "spec": {
            "initContainers": [{"name": "init", "resources": {"limits": {FUZZ_RESOURCE: "1"}}}],
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"limits": {FUZZ_RESOURCE: 1}, "requests": {FUZZ_RESOURCE: 1}},
                }
            ],
        },
    }


def _pod_with_claims() -> dict[str, Any]:
    doc = _pod()
    doc["metadata"]["name"] = f"{TAG}-dra"
    doc["spec"]["resourceClaims"] = [
        {"name": "one", "resourceClaimName": f"{TAG}-claim"},
        {"name": "two", "resourceClaimTemplateName": f"{TAG}-tmpl"},
    ]
    doc["spec"]["containers"][0]["resources"]["claims"] = [{"name": "one"}, {"name": "two", "request": "gpu"}]
    return doc


def _claim() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": f"{TAG}-claim", "namespace": "default"},
        "spec": {"devices": _devices_spec()},
    }


def _template() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": f"{TAG}-tmpl", "namespace": "default"},
        "spec": {"metadata": {"labels": {"app": TAG}}, "spec": {"devices": _devices_spec()}},
    }


def _device_class() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": f"{TAG}-class"},
        "spec": {
            "selectors": [{"cel": {"expression": _SELECTOR}}],
            "config": [{"opaque": {"driver": FUZZ_DRIVER, "parameters": {"mode": "x"}}}],
        },
    }


def _namespace() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": f"{TAG}-ns", "labels": {"resource.kubernetes.io/admin-access": "true"}},
    }


def _slice(node_name: str) -> dict[str, Any]:
    def device(i: int) -> dict[str, Any]:
        return {
            "name": f"d{i}",
            "attributes": {
                "model": {"string": "a"},
                "index": {"int": i},
                "fast": {"bool": True},
                "firmware": {"version": "1.2.3"},
            },
            "capacity": {"memory": {"value": "16Gi"}},
        }

    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": TAG},
        "spec": {
            "driver": FUZZ_DRIVER,
            "nodeName": node_name,
            "pool": {"name": TAG, "generation": 1, "resourceSliceCount": 1},
            "devices": [device(0), device(1)],
        },
    }


MANIFEST_KINDS: dict[str, Callable[[], dict[str, Any]]] = {
    "Pod": _pod,
    "Pod with claims": _pod_with_claims,
    "ResourceClaim": _claim,
    "ResourceClaimTemplate": _template,
    "DeviceClass": _device_class,
    "Namespace": _namespace,
}

# ----------------------------------------------------------------------------------------------------
# Hostile values

#: Names the API server refuses (and a few it takes, each unique to its file by TAG).
HOSTILE_NAMES: tuple[Any, ...] = (
    TAG.upper(),
    f"{TAG}_x",
    f"{TAG}/x",
    "..",
    f"{TAG}..x",
    f"{TAG} x",
    f"{TAG}\x00",
    f"{TAG}\x1b[31m",
    f"{TAG}\n",
    f"{TAG}\u202e",
    f"{TAG}[bold]",
    f"{TAG}é",
    f"-{TAG}",
    f"{TAG}-",
    f"{TAG}.{TAG}",
    "a" * 300 + TAG,
    "a" * 64 + TAG,
    TAG * 10,
    "",
    3.5,
    7,
    True,
    None,
    [TAG],
    {"name": TAG},
)

#: Quantities and counts: foreign digits, spaces, signs, NaN, past int64, fractions, other types.
HOSTILE_QUANTITIES: tuple[Any, ...] = (
    "\u0661",
    " 1",
    "1 ",
    "-0",
    "NaN",
    "Inf",
    "1e999999Gi",
    "1e308",
    2**64,
    2**63,
    "18446744073709551616",
    "500m",
    -1,
    "-1",
    0,
    "0",
    "1Ki",
    "1.5",
    1.5,
    float("inf"),
    "+1",
    "0x10",
    "1_000",
    "",
    "16Gi",
    "1E3",
    True,
    None,
    [],
    {"value": 1},
    10**18,
    "9" * 400,
)

_BUDGET_BOMB = "[{l}].all(x, [{l}].all(y, [{l}].all(z, [{l}].all(w, x + y + z + w >= 0))))".format(
    l=", ".join(["1"] * 40)
)

#: Selectors: syntax errors, wrong result types, unknown fields and functions, the cost budget, size.
#: Any that could be true for another driver's device is guarded by the fuzz driver.
HOSTILE_CEL: tuple[str, ...] = (
    "",
    "device.driver ==",
    "1",
    '"true"',
    "device.attributes",
    "device.nope",
    "device.attributes['x'].y.z()",
    f'{_SELECTOR} && device.attributes["{FUZZ_DRIVER}"].model.startsWith(1)',
    f"{_SELECTOR} && {_BUDGET_BOMB}",
    _BUDGET_BOMB,
    f'{_SELECTOR} && device.capacity["{FUZZ_DRIVER}"].memory.compareTo(quantity("1Gi")) > 0',
    f'{_SELECTOR} && device.attributes["{FUZZ_DRIVER}"].firmware.isGreaterThan(semver("1.0.0"))',
    f'{_SELECTOR} && device.attributes["{FUZZ_DRIVER}"].nope == 1',
    f'{_SELECTOR} && quantity("x") == quantity("1")',
    f"{_SELECTOR} && 1/0 == 1",
    "\x1b[31m",
    f"{_SELECTOR} && " + " && ".join(["true"] * 3000),
    "(" * 200 + "true" + ")" * 200,
    "device.driver == '\ud800'",
)

_SCALARS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=8),
    st.builds(list),
    st.builds(dict),
    st.lists(st.integers(min_value=-3, max_value=3), max_size=3),
)

_NAME_KEYS = frozenset(
    {
        "name",
        "namespace",
        "driver",
        "nodeName",
        "deviceClassName",
        "resourceClaimName",
        "resourceClaimTemplateName",
        "request",
        "matchAttribute",
    }
)
_QUANTITY_KEYS = frozenset({"count", "generation", "resourceSliceCount", "value", "int"})


# ----------------------------------------------------------------------------------------------------
# Mutations of the tree


def _paths(node: Any, here: Path_ = ()) -> list[Path_]:
    """Every path below the root: keys of mappings and indices of lists, parents before children."""
    out: list[Path_] = []
    if isinstance(node, dict):
        for key, value in node.items():
            out.append((*here, key))
            out.extend(_paths(value, (*here, key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out.append((*here, i))
            out.extend(_paths(value, (*here, i)))
    return out


def _parent(doc: Any, path: Path_) -> Any:
    for step in path[:-1]:
        doc = doc[step]
    return doc


def _is_limit_value(path: Path_) -> bool:
    return len(path) >= 2 and path[-2] in ("limits", "requests")


def _deep(depth: int, leaf: Any) -> Any:
    for i in range(depth):
        leaf = [leaf] if i % 2 else {"k": leaf}
    return leaf


@st.composite
def _mutate_tree(draw: st.DrawFn, doc: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """One mutation of `doc` (changed in place) and what it was."""
    paths = _paths(doc)
    path = draw(st.sampled_from(paths))
    parent = _parent(doc, path)
    last = path[-1]
    value = parent[last]
    where = ".".join(map(str, path))
    operation = draw(
        st.sampled_from(
            (
                "wrong type",
                "delete",
                "duplicate",
                "hostile",
                "hostile",
                "hostile",
                "unknown field",
                "deep",
                "huge",
                "anchor",
                "api version",
            )
        )
    )
    if operation == "wrong type":
        parent[last] = draw(_SCALARS)
        return doc, f"{where} = {parent[last]!r:.40}"
    if operation == "delete":
        del parent[last]
        return doc, f"{where} deleted"
    if operation == "duplicate":
        if isinstance(parent, list):
            parent.insert(last, copy.deepcopy(value))  # type: ignore[arg-type]
        elif isinstance(value, list) and value:
            value.append(copy.deepcopy(value[0]))
        else:
            # A mapping cannot hold a key twice: a copy beside it (a duplicated YAML key is a text
            # mutation, "duplicate line").
            parent[f"{last}-copy"] = copy.deepcopy(value)
        return doc, f"{where} duplicated"
    if operation == "hostile":
        if last == "expression":
            parent[last] = draw(st.sampled_from(HOSTILE_CEL))
        elif last in _QUANTITY_KEYS or _is_limit_value(path):
            parent[last] = copy.deepcopy(draw(st.sampled_from(HOSTILE_QUANTITIES)))
        elif last in _NAME_KEYS:
            parent[last] = copy.deepcopy(draw(st.sampled_from(HOSTILE_NAMES)))
        elif isinstance(parent, dict) and isinstance(last, str):
            # A hostile key: a resource name, a label or attribute key, an integer key.
            new_key = draw(st.sampled_from((7, None, 1.5, *[n for n in HOSTILE_NAMES if isinstance(n, str)])))
            parent[new_key] = parent.pop(last)
        else:
            parent[last] = copy.deepcopy(draw(st.sampled_from(HOSTILE_NAMES)))
        return doc, f"{where} hostile"
    if operation == "unknown field":
        target = value if isinstance(value, dict) else parent if isinstance(parent, dict) else doc
        target[draw(st.sampled_from(("x-fuzz", "status", "extra", "spec2")))] = draw(_SCALARS)
        return doc, f"{where} unknown field"
    if operation == "deep":
        # Deeper still (10,000 levels) are the special files': a dumper would recurse past Python's limit.
        depth = draw(st.sampled_from((20, 60, 99, 101, 150)))
        parent[last] = _deep(depth, value)
        return doc, f"{where} {depth} levels deep"
    if operation == "huge":
        # A string past the 1.5 MiB of one object, or many small nodes (a wide document is a special file:
        # PyYAML's dumper takes seconds for one).
        size = draw(st.sampled_from((1_000, 20_000, 2_000_000)))
        huge = draw(st.sampled_from(("string", "list", "map")))
        if huge == "string" or size > 20_000:
            parent[last] = "x" * size
        else:
            parent[last] = [0] * (size // 4) if huge == "list" else {f"k{i}": i for i in range(size // 20)}
        return doc, f"{where} huge {huge} ({size})"
    if operation == "anchor":
        return doc, f"{where} anchored"  # rendered with an anchor and an alias (see _render)
    doc["apiVersion"] = draw(
        st.sampled_from(
            ("v1", "resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha3", "", 1)
        )
    )
    return doc, f"apiVersion {doc['apiVersion']!r}"


@st.composite
def mutated_document(draw: st.DrawFn, make: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """A valid document of one kind with zero to three mutations (most often none), and what they were."""
    doc = make()
    done: list[str] = []
    # Most documents of a file untouched or mutated once: one bad document refuses its whole file, and the
    # files the daemon takes are half of what is tried.
    for _ in range(draw(st.sampled_from((0, 0, 0, 0, 0, 1, 1, 1, 2, 3)))):
        if not _paths(doc):
            break
        doc, what = draw(_mutate_tree(doc))
        done.append(what)
    return doc, done


# ----------------------------------------------------------------------------------------------------
# Rendering and text mutations

_INSERTS: tuple[bytes, ...] = (
    b"\xff",
    b"\xc3\x28",
    b"\xed\xa0\x80",
    b"\x00",
    b"\x1b[31m",
    b"\x7f",
    b"\t",
    b"\r",
    b"\xef\xbb\xbf",
    b"{{ .Values.x }}",
    b"&a ",
    b"*a",
    b"!!python/object/apply:os.system ['true'] ",
    b"<<: *x\n",
    b"%YAML 1.1\n",
    b"\n---\n",
    b"\n...\n",
    b"'",
    b'"',
    b"{",
    b"]",
)


def _retagged(doc: Any, tag: str) -> Any:
    if isinstance(doc, str):
        return doc.replace(TAG, tag)
    if isinstance(doc, dict):
        return {_retagged(k, tag): _retagged(v, tag) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_retagged(v, tag) for v in doc]
    return doc


def _json_text(docs: list[Any]) -> str:
    doc = docs[0] if len(docs) == 1 else {"apiVersion": "v1", "kind": "List", "items": docs}
    # Lone surrogates become \ud800 escapes: JSON text that is not UTF-8 once decoded.
    return json.dumps(doc, ensure_ascii=True, allow_nan=True)


def _yaml_text(docs: list[Any], flow: bool) -> str:
    try:
        # libyaml's emitter when there: PyYAML's own takes most of the time of drawing a file.
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        return yaml.dump_all(
            docs, Dumper=dumper, default_flow_style=flow, allow_unicode=True, width=1_000_000
        )
    except (yaml.YAMLError, UnicodeEncodeError):
        # Not representable in YAML (a lone surrogate, a key of a strange type): JSON is YAML too.
        return "\n---\n".join(_json_text([d]) for d in docs) + "\n"


def _anchored(text: str) -> str:
    """Every `metadata:` mapping given an anchor, and an alias of it added under an unknown key."""
    out = []
    for line in text.splitlines(keepends=True):
        out.append(line)
        if line == "metadata:\n":
            out[-1] = "metadata: &meta\n"
    joined = "".join(out)
    return joined.replace("\n---\n", "\nx-copy: *meta\n---\n") + (
        "x-copy: *meta\n" if "&meta" in joined else ""
    )


@dataclass(frozen=True, slots=True)
class FuzzFile:
    """One file to write: its name and bytes (TAG still in both), and how it was made."""

    name: str
    content: bytes
    made: str
    documents: int = 1

    def __repr__(self) -> str:
        # What a failing example shows: the content cut short (a file can be megabytes).
        head = self.content[:300] + (b"..." if len(self.content) > 300 else b"")
        return f"FuzzFile({self.name!r}, {len(self.content)} bytes {head!r}, made: {self.made})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))  # hypothesis's printer, for a failing example

    def tagged(self, tag: str) -> FuzzFile:
        return FuzzFile(
            self.name.replace(TAG, tag),
            self.content.replace(TAG.encode(), tag.encode()),
            self.made,
            self.documents,
        )


#: File names: plain, or with a control character, rich markup, a space, a byte that is not UTF-8.
_NAME_PARTS = ("", "", "", "", "\x1b[31m", "\n", "[bold]", "[red", " sp", "é", "\udcff", "\t")


@st.composite
def _file(draw: st.DrawFn, kinds: dict[str, Callable[[], dict[str, Any]]]) -> FuzzFile:
    chosen = draw(st.lists(st.sampled_from(sorted(kinds)), min_size=1, max_size=3))
    docs: list[Any] = []
    made: list[str] = []
    for i, kind in enumerate(chosen):
        doc, what = draw(mutated_document(kinds[kind]))
        if kind in chosen[:i]:
            doc = _retagged(doc, f"{TAG}n{i}")  # a second document of a kind: its own names
        docs.append(doc)
        made.append(f"{kind}[{', '.join(what) or 'valid'}]")
    render = draw(st.sampled_from(("yaml", "yaml", "flow", "json", "json as yaml", "list")))
    if render == "json":
        text, ext = _json_text(docs), "json"
    elif render == "json as yaml":
        text, ext = _json_text(docs), "yaml"
    elif render == "list":
        text, ext = _yaml_text([{"apiVersion": "v1", "kind": "List", "items": docs}], False), "yml"
    else:
        text, ext = _yaml_text(docs, render == "flow"), "yaml"
    if any("anchored" in m for m in made) and render == "yaml":
        text = _anchored(text)
    extra = draw(st.sampled_from(("",) * 9 + ("alias bomb", "recursive anchor", "aliases")))
    if extra and ext != "json" and not text.lstrip().startswith(("{", "[")):
        text += {
            "alias bomb": ALIAS_BOMB,
            "recursive anchor": "x-loop: &loop [1, *loop]\n",
            "aliases": "x-a: &x {k: [1, 2, 3]}\nx-b: *x\nx-c: [*x, *x]\n",
        }[extra]
        made.append(extra)
    content = text.encode("utf-8", "surrogatepass")
    for _ in range(draw(st.sampled_from((0, 0, 0, 0, 0, 0, 0, 1, 1, 2)))):
        at = draw(st.integers(min_value=0, max_value=len(content)))
        edit = draw(st.sampled_from(("cut", "insert", "insert", "duplicate line")))
        if edit == "cut":
            content = content[:at]
        elif edit == "insert":
            content = content[:at] + draw(st.sampled_from(_INSERTS)) + content[at:]
        else:
            lines = content.splitlines(keepends=True) or [b""]
            i = min(at, len(lines) - 1)
            lines.insert(i, lines[i])
            content = b"".join(lines)
        made.append(f"text {edit} at {at}")
    name = f"f-{TAG}{draw(st.sampled_from(_NAME_PARTS))}.{ext}"
    return FuzzFile(name, content, f"{render}: " + "; ".join(made), len(docs))


def manifest_files() -> st.SearchStrategy[FuzzFile]:
    """A manifest file of Pods, ResourceClaims, ResourceClaimTemplates, DeviceClasses and Namespaces."""
    return _file(MANIFEST_KINDS)


def slice_files(node_name: str) -> st.SearchStrategy[FuzzFile]:
    """A ResourceSlice file for `node_name` (one to three slices)."""
    return _file({"ResourceSlice": lambda: _slice(node_name)})


# ----------------------------------------------------------------------------------------------------
# Files a careless script or a hostile user leaves (the same every batch)

#: What each hostile content is refused with (in its one line), "" when it is taken.
HOSTILE_CONTENT_LINES = {
    "bomb": "document contains excessive aliasing (",
    "deep": "nested deeper than 100 levels",
    "deep-json": "nested deeper than 100 levels",
    "loop": "a YAML anchor's value contains itself (a recursive alias)",
    "huge-file": "larger than the 3 MiB limit of a manifest file",
    "huge-document": "a YAML document larger than the 1.5 MiB limit of one object",
    "surrogate": "is not valid UTF-8 (a lone surrogate)",
    "wide": "",
    "wide-error": "YAML error at the end of the file: did not find expected ',' or ']'",
}

#: About 700,000 nodes in 1.4 MB: within every limit, and the costliest document to read (seconds, and
#: the most memory per byte of text).
_WIDE = "[" + ",".join(["0"] * 700_000) + "]"


def hostile_contents(head: dict[str, Any], *, wide: bool) -> list[tuple[FuzzFile, str]]:
    """Regular files past each reading limit, built on the valid document `head`: each file and what its
    line says (HOSTILE_CONTENT_LINES). `wide`: the costliest documents within the limits too, one of them
    with an error at its end."""
    text = _yaml_text([head], flow=False)
    surrogate = _retagged(head, f"{TAG}\ud800")
    made = {
        "bomb": text + ALIAS_BOMB,
        "deep": "[" * 10_000 + "]" * 10_000 + "\n",
        "deep-json": "[" * 10_000 + "]" * 10_000,
        "loop": text + "x-loop: &loop [1, *loop]\n",
        "huge-file": "# " + "x" * (4 << 20) + "\n",
        "huge-document": text + f"x-big: '{'x' * (2 << 20)}'\n",
        "surrogate": json.dumps(surrogate),
    }
    if wide:
        made["wide"] = text + f"x-wide: {_WIDE}\n"
        made["wide-error"] = text + f"x-wide: {_WIDE[:-1]}\n"
    return [
        (
            FuzzFile(
                f"f-{TAG}-{what}.{'json' if what in ('deep-json', 'surrogate') else 'yaml'}",
                content.encode(),
                what,
            ),
            HOSTILE_CONTENT_LINES[what],
        )
        for what, content in made.items()
    ]


def valid_pod(name: str = TAG) -> dict[str, Any]:
    """The fuzzed Pod before any mutation."""
    doc = _pod()
    doc["metadata"]["name"] = name
    return doc


def valid_slice(node_name: str) -> dict[str, Any]:
    """The fuzzed ResourceSlice before any mutation."""
    return _slice(node_name)
