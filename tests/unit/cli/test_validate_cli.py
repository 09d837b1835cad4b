"""`probemarker validate`, `crd`, `--version`: output and exit codes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from probemarker import __version__
from probemarker.cli import main, render_crd

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "manifests" / "examples").glob("*.yaml"))

VALID = """\
apiVersion: probemarker.io/v1alpha1
kind: PodProbeMarker
metadata: {name: ok, namespace: ns}
spec:
  selector: {matchLabels: {app: a}}
  probes:
  - name: p
    containerName: c
    probe: {tcpSocket: {port: 80}}
    podConditionType: example.com/Up
"""


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_examples_are_valid(capsys: pytest.CaptureFixture[str]) -> None:
    assert len(EXAMPLES) >= 3
    code, out, _ = run(["validate", *map(str, EXAMPLES)], capsys)
    assert code == 0
    assert out.count("OK ") == sum(p.read_text().count("kind: PodProbeMarker") for p in EXAMPLES)


def test_invalid_document_names_file_document_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = VALID.replace("port: 80", "port: 0")
    path = tmp_path / "two.yaml"
    path.write_text(VALID + "---\n" + bad)
    code, out, _ = run(["validate", str(path)], capsys)
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == f"OK ns/ok ({path}, document 1)"
    assert lines[1].startswith(
        f"{path}: document 2: PodProbeMarker ns/ok: spec.probes[0].probe.tcpSocket.port: "
        "must be a port number between 1 and 65535"
    )


def test_unreadable_file_exits_2_and_still_checks_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(VALID)
    code, out, err = run(["validate", str(tmp_path / "missing.yaml"), str(good)], capsys)
    assert code == 2
    assert "missing.yaml: cannot read: No such file or directory" in err
    assert out.startswith("OK ns/ok")


def test_binary_file_is_unreadable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    code, _, err = run(["validate", str(path)], capsys)
    assert code == 2
    assert "not UTF-8 text" in err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("a: [1, 2\n", "not valid YAML: line 2, column 1", id="syntax"),
        pytest.param("- 1\n- 2\n", "must be an object (a map of fields), got list", id="list"),
        pytest.param("just text\n", 'got "just text"', id="scalar"),
        pytest.param(
            VALID.replace("kind: PodProbeMarker", "kind: Pod"),
            'kind: must be "PodProbeMarker"',
            id="wrong-kind",
        ),
        pytest.param(
            VALID.replace("name: p\n", "name: p\n    name: q\n"),
            "found duplicate key 'name'",
            id="duplicate-key",
        ),
    ],
)
def test_garbage_gives_a_message_not_a_traceback(
    text: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(text)
    code, out, err = run(["validate", str(path)], capsys)
    assert code == 1
    assert expected in out
    assert "Traceback" not in out + err


def test_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(VALID))
    code, out, _ = run(["validate", "-"], capsys)
    assert (code, out) == (0, "OK ns/ok (<stdin>, document 1)\n")


def test_kind_list_is_unrolled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    item = yaml.safe_load(VALID)
    path = tmp_path / "list.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [item, item]}))
    code, out, _ = run(["validate", str(path)], capsys)
    assert code == 0
    assert "document 1, items[1]" in out


def test_crd_manifest_is_generated_from_the_rules() -> None:
    committed = (ROOT / "manifests" / "crd" / "podprobemarkers.probemarker.io.yaml").read_text()
    assert committed == render_crd(), (
        "regenerate: probemarker crd > manifests/crd/podprobemarkers.probemarker.io.yaml"
    )


def test_version_and_help_through_python_m() -> None:
    version = subprocess.run(
        [sys.executable, "-m", "probemarker", "--version"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert version.stdout.strip() == f"probemarker {__version__}"
    helptext = subprocess.run(
        [sys.executable, "-m", "probemarker", "--help"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert "validate" in helptext.stdout
    assert "crd" in helptext.stdout


def test_hostile_keys_in_a_field_path_are_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An error's path holds the marker's own keys (`labels[KEY]`): a key with an
    escape sequence, a C1 CSI or a bidi override is shown escaped, never raw."""
    body = {
        "apiVersion": "probemarker.io/v1alpha1",
        "kind": "PodProbeMarker",
        "metadata": {"name": "ok", "namespace": "ns"},
        "spec": {
            "selector": {"matchLabels": {"app\x9b2J": "a"}},
            "probes": [
                {
                    "name": "p",
                    "containerName": "c",
                    "probe": {"tcpSocket": {"port": 80}},
                    "markerPolicy": [
                        {"state": "Succeeded", "labels": {"k\x1b]52;c;eA==\x07\u202e": "v"}}
                    ],
                }
            ],
        },
    }
    path = tmp_path / "hostile\x1b[2J.json"
    path.write_text(json.dumps(body))
    code, out, _ = run(["validate", str(path)], capsys)
    assert code == 1
    assert [c for c in out if c != "\n" and unicodedata.category(c)[0] == "C"] == []
    shown_path = str(path).replace("\x1b", "\\x1b")
    assert (
        f"{shown_path}: document 1: PodProbeMarker ns/ok: spec.selector.matchLabels[app\\x9b2J]: "
        in out
    )
    assert "spec.probes[0].markerPolicy[0].labels[k\\x1b]52;c;eA==\\x07\\u202e]: " in out
