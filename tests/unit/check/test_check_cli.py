"""`probemarker check` on the command line: usage and validation errors exit 2 before
any cluster is asked (the kubeconfig named here does not exist)."""

from __future__ import annotations

from pathlib import Path

import pytest

from probemarker.cli import main

DATA = Path(__file__).parents[2] / "data" / "markers"
NO_CLUSTER = ["--kubeconfig", "/nonexistent/kubeconfig"]


def test_an_invalid_marker_file_prints_the_validators_messages(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = DATA / "invalid" / "annotation-key-invalid.yaml"
    code = main(["check", "-f", str(path), *NO_CLUSTER])
    err = capsys.readouterr().err
    assert code == 2
    # The same line `probemarker validate` prints for this file.
    assert main(["validate", str(path)]) == 1
    validated = capsys.readouterr().out.splitlines()
    assert validated
    for line in validated:
        assert line in err
    assert "the PodProbeMarker is invalid" in err


def test_a_namespace_that_contradicts_the_file_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = (DATA / "invalid" / "annotation-key-invalid.yaml").read_text()
    path = tmp_path / "marker.yaml"
    path.write_text(bad.replace("example.com/bad key", "example.com/good"))
    code = main(["check", "-f", str(path), "-n", "other", *NO_CLUSTER])
    assert code == 2
    assert "does not match --namespace other" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["check"], id="no-marker"),
        pytest.param(["check", "-f", "x.yaml", "--marker", "a/b"], id="file-and-marker"),
        pytest.param(["check", "--marker", "a/b", "-o", "yaml"], id="bad-output"),
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        pytest.param(
            ["check", "--marker", "nameonly", *NO_CLUSTER], "expected NAMESPACE/NAME", id="ref"
        ),
        pytest.param(
            ["check", "--marker", "a/b", "--direct", "--via-api-proxy", *NO_CLUSTER],
            "choose one",
            id="direct-and-proxy",
        ),
        pytest.param(["check", "-f", "/nonexistent.yaml", *NO_CLUSTER], "cannot read", id="file"),
        pytest.param(
            ["check", "--marker", "a/b", "-n", "c", *NO_CLUSTER],
            "is in namespace a, not --namespace c",
            id="marker-namespace",
        ),
        pytest.param(
            ["check", "--marker", "a/b", *NO_CLUSTER], "/nonexistent/kubeconfig", id="kubeconfig"
        ),
    ],
)
def test_problems_exit_2_with_a_message(
    argv: list[str], problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert problem in capsys.readouterr().err
