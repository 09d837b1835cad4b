"""`probemarker validate` on real-world files: Kruise manifests, kustomize build output
with other kinds, and files without any PodProbeMarker (docs/cli.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from probemarker.api.documents import OtherObject, other_object
from probemarker.cli import main

ROOT = Path(__file__).resolve().parents[3]

MARKER = """\
apiVersion: probemarker.io/v1alpha1
kind: PodProbeMarker
metadata: {name: idle, namespace: games}
spec:
  selector: {matchLabels: {app: game}}
  probes:
  - name: idle
    containerName: game
    probe: {exec: {command: [/idle.sh]}}
    podConditionType: example.com/Idle
"""
KRUISE = MARKER.replace("probemarker.io/v1alpha1", "apps.kruise.io/v1alpha1")

# What `kustomize build` gives for an app with a marker: other kinds around it.
OTHERS = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: podprobemarkers.probemarker.io}
---
apiVersion: v1
kind: Namespace
metadata: {name: games}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: game-config, namespace: games}
data: {a: b}
---
apiVersion: v1
kind: Service
metadata: {name: game, namespace: games}
spec: {ports: [{port: 80}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: game, namespace: games}
spec: {template: {spec: {containers: [{name: game, image: game:1}]}}}
---
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: {name: game-set, namespace: games}
"""
SKIPPED = [
    "document 1: skipped CustomResourceDefinition podprobemarkers.probemarker.io "
    "(apiextensions.k8s.io/v1): not a PodProbeMarker",
    "document 2: skipped Namespace games (v1): not a PodProbeMarker",
    "document 3: skipped ConfigMap games/game-config (v1): not a PodProbeMarker",
    "document 4: skipped Service games/game (v1): not a PodProbeMarker",
    "document 5: skipped Deployment games/game (apps/v1): not a PodProbeMarker",
    "document 6: skipped CloneSet games/game-set (apps.kruise.io/v1alpha1): not a PodProbeMarker",
]


def validate(
    tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, Path]:
    path = tmp_path / "input.yaml"
    path.write_text(text)
    code = main(["validate", str(path)])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    return code, captured.out, path


def test_valid_kruise_manifest_is_valid_and_says_which_apiversion_to_apply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, path = validate(tmp_path, KRUISE, capsys)
    assert code == 0
    ok, note = out.splitlines()
    assert ok == f"OK games/idle ({path}, document 1)"
    assert note.startswith(f"{path}: document 1: note: PodProbeMarker games/idle: ")
    assert "apply it with apiVersion: probemarker.io/v1alpha1" in note
    assert "run the daemon with --marker-group apps.kruise.io" in note
    assert "manifests/components/kruise-group/" in note


def test_invalid_kruise_manifest_gets_its_errors_and_the_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = KRUISE.replace("[/idle.sh]}", "[/idle.sh]}, periodSeconds: 0")
    code, out, path = validate(tmp_path, bad, capsys)
    assert code == 1
    assert (
        f"{path}: document 1: PodProbeMarker games/idle: spec.probes[0].probe.periodSeconds: "
        "must be at least 1, got 0 (omit the field for the default of 10)" in out
    )
    assert "apply it with apiVersion: probemarker.io/v1alpha1" in out


def test_our_apiversion_gets_no_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = validate(tmp_path, MARKER, capsys)
    assert code == 0
    assert "note" not in out


def test_kustomize_output_skips_other_kinds_with_a_note_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, path = validate(tmp_path, OTHERS + "---\n" + MARKER, capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines == [f"{path}: {line}" for line in SKIPPED] + [
        f"OK games/idle ({path}, document 7)"
    ]


def test_an_invalid_marker_among_other_kinds_fails_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = MARKER.replace("podConditionType: example.com/Idle", "podConditionType: Ready")
    code, out, path = validate(tmp_path, OTHERS + "---\n" + bad, capsys)
    assert code == 1
    assert (
        f"{path}: document 7: PodProbeMarker games/idle: spec.probes[0].podConditionType: " in out
    )
    assert out.count("skipped") == len(SKIPPED)


def test_file_with_only_other_kinds_says_so_and_is_not_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, path = validate(tmp_path, OTHERS, capsys)
    assert code == 0
    assert out.splitlines()[-1] == (
        f"{path}: no PodProbeMarker found (6 documents of other kinds skipped)"
    )


def test_empty_file_says_so_and_is_not_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, path = validate(tmp_path, "---\n# nothing\n", capsys)
    assert code == 0
    assert out == f"{path}: no documents found, so no PodProbeMarker to validate\n"


def test_one_other_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = validate(tmp_path, "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n", capsys)
    assert code == 0
    assert "no PodProbeMarker found (1 document of another kind skipped)" in out


def test_the_crd_and_the_examples_together(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted((ROOT / "manifests").rglob("*.yaml"))
    code = main(["validate", *map(str, files)])
    out = capsys.readouterr().out
    assert code == 0
    assert "skipped CustomResourceDefinition podprobemarkers.probemarker.io" in out
    examples = (ROOT / "manifests" / "examples").glob("*.yaml")
    assert out.count("OK ") == sum(p.read_text().count("kind: PodProbeMarker") for p in examples)


def test_kind_list_items_of_other_kinds_are_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: p}}\n"
    )
    code, out, path = validate(tmp_path, text, capsys)
    assert code == 0
    assert f"{path}: document 1, items[0]: skipped Pod p (v1): not a PodProbeMarker" in out


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}},
            OtherObject("Deployment", "d", "apps/v1"),
            id="deployment",
        ),
        pytest.param(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "p-"}},
            OtherObject("Pod", "p-", "v1"),
            id="generate-name",
        ),
        pytest.param(
            {"apiVersion": "v1", "kind": "Pod"}, OtherObject("Pod", "<unnamed>", "v1"), id="no-meta"
        ),
        pytest.param(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a\nb\x1b[31m"}},
            OtherObject("Pod", "a\\nb\\x1b[31m", "v1"),
            id="hostile-name-escaped",
        ),
        # Validated as a PodProbeMarker, so the validator names the field to fix:
        pytest.param(
            {"apiVersion": "probemarker.io/v1alpha1", "kind": "Pod"}, None, id="our-group"
        ),
        pytest.param({"apiVersion": "probemarker.io/v1", "kind": "Foo"}, None, id="our-group-v1"),
        pytest.param({"apiVersion": "x.io/v1", "kind": "PodProbeMaker"}, None, id="kind-typo"),
        pytest.param({"apiVersion": "x.io/v1", "kind": "podprobemarker"}, None, id="kind-case"),
        pytest.param({"apiVersion": "x.io/v1", "kind": "PodProbeMarker"}, None, id="other-group"),
        pytest.param({"kind": "Deployment"}, None, id="no-apiversion"),
        pytest.param({"apiVersion": "apps/v1"}, None, id="no-kind"),
        pytest.param({"apiVersion": "apps/v1", "kind": 3}, None, id="kind-not-string"),
        pytest.param(["a"], None, id="not-an-object"),
    ],
)
def test_other_object(body: Any, expected: OtherObject | None) -> None:
    assert other_object(body) == expected
