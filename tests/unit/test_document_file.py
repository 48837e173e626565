"""A file that is not YAML is refused in one line saying where and what was expected (lines and columns
from 1, as an editor shows them), and a Helm template says it is one: in the manifest folder and in the
ResourceSlice folder alike, which both read through `resource.document_file`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubedevice.controlplane.slice_pools import parse_slice_file
from kubedevice.node.manifest_folder import ManifestFolder
from kubedevice.resource.document_file import PURE_WORDING_BYTES, ManifestError, load_documents

POD_WITH_A_COLON = b"""apiVersion: v1
kind: Pod
metadata:
  name: x
spec:
  containers:
  - name: main
    image: x: y
"""
HELM_VALUE = b"""apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: {{ .Values.className }}
"""
HELM_CONTROL = b"""{{- if .Values.enabled }}
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu
{{- end }}
"""


@pytest.mark.parametrize(
    ("content", "line"),
    [
        (POD_WITH_A_COLON, "YAML error at line 8, column 13: mapping values are not allowed here"),
        (b"kind: Pod\n  - : [", "YAML error at line 2, column 5: mapping values are not allowed here"),
        (
            b"a: 1\n\tb: 2\n",
            "YAML error at line 2, column 1: found character '\\t' that cannot start any token",
        ),
        (
            b"- a\nb: c\n",
            "YAML error at line 2, column 1: expected <block end>, but found '?' "
            "(while parsing a block collection at line 1, column 1)",
        ),
        (
            b"a: {b: 1}}\n",
            "YAML error at line 1, column 10: expected <block end>, but found '}' "
            "(while parsing a block mapping at line 1, column 1)",
        ),
        (
            b"key: 'unclosed\n",
            "YAML error at the end of the file: found unexpected end of stream "
            "(while scanning a quoted scalar at line 1, column 6)",
        ),
        (
            b"kind: [",
            "YAML error at the end of the file: expected the node content, but found '<stream end>'",
        ),
        (b"a: *nowhere\n", "YAML error at line 1, column 4: found undefined alias 'nowhere'"),
        (
            b"a: 1\nb: x\x07\n",
            "YAML error at line 2, column 5: unacceptable character #x0007: "
            "special characters are not allowed",
        ),
    ],
)
def test_a_yaml_error_is_one_line_with_the_line_and_column(content: bytes, line: str) -> None:
    with pytest.raises(ManifestError) as refused:
        load_documents("gpu.yaml", content)
    assert str(refused.value) == line


@pytest.mark.parametrize(
    ("content", "where"),
    [
        (HELM_VALUE, "line 4, column 9"),
        (HELM_CONTROL, "line 1, column 1"),
        (b"a: '{{- x }}'\nb: [\n", "line 1, column 5"),
    ],
)
def test_a_helm_template_says_it_is_one(content: bytes, where: str) -> None:
    with pytest.raises(ManifestError) as refused:
        load_documents("class.yaml", content)
    assert (
        str(refused.value)
        == f"looks like a Helm template ({{{{ at {where}) — render it with `helm template` first"
    )


def test_braces_in_strings_and_comments_are_no_template() -> None:
    # Broken YAML that only quotes or comments `{{ }}` is a YAML error, not a template.
    for content in (b"a: '{{ x }}'\nb: [\n", b'a: "{{ x }}" # {{ y }}\nb: [\n', b"# {{ .Values }}\nb: [\n"):
        with pytest.raises(ManifestError) as refused:
            load_documents("gpu.yaml", content)
        assert str(refused.value).startswith("YAML error at the end of the file: ")
    # Valid YAML with braces in a string is read as it is.
    assert load_documents("gpu.yaml", b"a: '{{ x }}'\n") == [{"a": "{{ x }}"}]


def test_both_folders_report_the_same_line(tmp_path: Path) -> None:
    (tmp_path / "gpu.yaml").write_bytes(POD_WITH_A_COLON)
    (tmp_path / "class.yaml").write_bytes(HELM_VALUE)
    errors = ManifestFolder(tmp_path).scan().errors
    assert errors["gpu.yaml"] == "YAML error at line 8, column 13: mapping values are not allowed here"
    assert errors["class.yaml"].startswith("looks like a Helm template ({{ at line 4, column 9)")
    (report,) = parse_slice_file("gpu.example.com.yaml", POD_WITH_A_COLON).errors
    assert report.message == "YAML error at line 8, column 13: mapping values are not allowed here"


@pytest.mark.skipif(getattr(yaml, "CSafeLoader", None) is None, reason="libyaml's words need libyaml")
def test_a_large_text_that_is_not_yaml_keeps_libyamls_words() -> None:
    """Found by the fuzz suite: 2.8 MB of small flow items with an error at the end, read again by the pure
    loader for its words, kept the manifest scan's thread for over 40 s (and every pod written meanwhile
    waiting). Past PURE_WORDING_BYTES the error is libyaml's (go-yaml's words, as kubectl's); below, the
    pure loader's as before."""
    items = ",".join(["1"] * (PURE_WORDING_BYTES // 2))
    with pytest.raises(ManifestError) as err:
        load_documents("big.yaml", f"a: [{items}\nb: 1\n".encode())
    assert str(err.value) == (
        "YAML error at line 2, column 2: did not find expected ',' or ']' "
        "(while parsing a flow sequence at line 1, column 4)"
    )
    with pytest.raises(ManifestError) as err:
        load_documents("small.yaml", b"a: [1, 2\nb: 1\n")
    assert str(err.value) == (
        "YAML error at line 2, column 2: expected ',' or ']', but got ':' "
        "(while parsing a flow sequence at line 1, column 4)"
    )
