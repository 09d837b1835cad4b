"""settings.py: flags win over PROBEMARKER_* variables, which win over defaults."""

from __future__ import annotations

import pytest

from probemarker.settings import RunSettings, SettingsError, parse_run_settings


def test_defaults_and_node_from_downward_api() -> None:
    settings = parse_run_settings([], {"NODE_NAME": "n1"})
    assert settings == RunSettings(node="n1")


def test_write_budgets_default_to_the_kubelets() -> None:
    # kubelet: kubeAPIQPS 50, kubeAPIBurst 100; eventRecordQPS 50, eventBurst 100.
    settings = RunSettings(node="n")
    assert (settings.write_qps, settings.write_burst) == (50.0, 100)
    assert (settings.event_qps, settings.event_burst) == (50.0, 100)


def test_the_event_budget_is_its_own_setting() -> None:
    env = {"PROBEMARKER_EVENT_QPS": "2.5", "PROBEMARKER_EVENT_BURST": "7"}
    settings = parse_run_settings(["--node", "n", "--event-burst", "9"], env)
    assert (settings.event_qps, settings.event_burst) == (2.5, 9)
    assert (settings.write_qps, settings.write_burst) == (50.0, 100)


def test_flags_win_over_environment() -> None:
    env = {"PROBEMARKER_NODE": "env-node", "PROBEMARKER_MAX_CONCURRENT_PROBES": "8"}
    settings = parse_run_settings(["--node", "flag-node", "--namespaces", "b,a,a"], env)
    assert settings.node == "flag-node"
    assert settings.max_concurrent_probes == 8
    assert settings.namespaces == ("a", "b")


@pytest.mark.parametrize(
    ("argv", "env", "needle"),
    [
        pytest.param([], {}, "no node name", id="no-node"),
        pytest.param(["--node", "n", "--write-qps", "0"], {}, "--write-qps='0'", id="qps"),
        pytest.param(
            ["--node", "n"], {"PROBEMARKER_EVENT_BURST": "0"}, "EVENT_BURST='0'", id="event-burst"
        ),
        pytest.param(
            ["--node", "n"],
            {"PROBEMARKER_MAX_CONCURRENT_PROBES": "many"},
            "PROBEMARKER_MAX_CONCURRENT_PROBES='many'",
            id="env-not-int",
        ),
        pytest.param(["--node", "n", "--log-format", "xml"], {}, "one of auto", id="choice"),
        pytest.param(["--node", "n", "--marker-group", "x.io"], {}, "apps.kruise.io", id="group"),
    ],
)
def test_errors_name_the_setting(argv: list[str], env: dict[str, str], needle: str) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_run_settings(argv, env)
    assert needle in str(caught.value)


@pytest.mark.parametrize(
    "flag", ["--write-qps", "--write-coalesce-seconds", "--shutdown-grace-seconds"]
)
@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-inf", "Infinity"])
def test_non_finite_numbers_are_refused(flag: str, text: str) -> None:
    """NaN passed every bound (it compares false); inf is never a meant rate or wait."""
    with pytest.raises(SettingsError) as caught:
        parse_run_settings(["--node", "n", f"{flag}={text}"], {})
    assert str(caught.value) == f"{flag}={text!r}: must be a finite number"


def test_non_finite_number_from_the_environment_is_refused() -> None:
    with pytest.raises(SettingsError, match=r"PROBEMARKER_WRITE_QPS='nan': must be a finite"):
        parse_run_settings(["--node", "n"], {"PROBEMARKER_WRITE_QPS": "nan"})


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        pytest.param(",,", "must name at least one namespace", id="only-commas"),
        pytest.param(" , ", "must name at least one namespace", id="blank-parts"),
        pytest.param("", "must name at least one namespace", id="empty-flag"),
        pytest.param("web,Team_A", "namespace 'Team_A' must be a DNS label", id="not-a-name"),
    ],
)
def test_namespaces_that_name_no_namespace_are_refused(text: str, needle: str) -> None:
    """`--namespaces ,,` used to mean all namespaces, silently."""
    with pytest.raises(SettingsError) as caught:
        parse_run_settings(["--node", "n", "--namespaces", text], {})
    assert needle in str(caught.value)


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        pytest.param([], {}, None, id="nothing-in-cluster"),
        pytest.param([], {"KUBECONFIG": "/k"}, "/k", id="kubectl-variable"),
        pytest.param([], {"KUBECONFIG": "/a:/b"}, "/a:/b", id="kubectl-list"),
        pytest.param([], {"KUBECONFIG": ""}, None, id="empty-is-unset"),
        pytest.param(
            [], {"KUBECONFIG": "/k", "PROBEMARKER_KUBECONFIG": "/p"}, "/p", id="ours-wins"
        ),
        pytest.param(
            ["--kubeconfig", "/f"],
            {"KUBECONFIG": "/k", "PROBEMARKER_KUBECONFIG": "/p"},
            "/f",
            id="flag-wins",
        ),
    ],
)
def test_kubeconfig_precedence(argv: list[str], env: dict[str, str], expected: str | None) -> None:
    """--kubeconfig > PROBEMARKER_KUBECONFIG > KUBECONFIG > in-cluster (None)."""
    settings = parse_run_settings(["--node", "n", *argv], env)
    assert settings.kubeconfig == expected


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        pytest.param([], {"NODE_NAME": "d", "PROBEMARKER_NODE": "p"}, "p", id="ours-wins"),
        pytest.param(["--node", "f"], {"NODE_NAME": "d", "PROBEMARKER_NODE": "p"}, "f", id="flag"),
    ],
)
def test_node_precedence(argv: list[str], env: dict[str, str], expected: str) -> None:
    assert parse_run_settings(argv, env).node == expected


def run_help(monkeypatch: pytest.MonkeyPatch) -> str:
    import argparse

    from probemarker.settings import add_arguments

    monkeypatch.setenv("COLUMNS", "1000")  # no line breaks (argparse breaks at hyphens)
    parser = argparse.ArgumentParser(prog="probemarker run")
    add_arguments(parser)
    return parser.format_help()


def test_help_shows_what_each_flag_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    text = run_help(monkeypatch)
    for usage in (
        "--kubeconfig FILE",
        "--context NAME",
        "--node NAME",
        "--namespaces NS[,NS...]",
        "--max-concurrent-probes N",
        "--write-qps N",
        "--write-burst N",
        "--write-coalesce-seconds SECONDS",
        "--shutdown-grace-seconds SECONDS",
        "--log-level LEVEL",
        "--metrics-address ADDRESS",
    ):
        assert usage in text
    assert "VALUE" not in text
    assert text.count("default: none") == 1  # the node's; the others say what unset means


def test_help_says_which_source_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    text = run_help(monkeypatch)
    assert "the first of --kubeconfig, $PROBEMARKER_KUBECONFIG, $KUBECONFIG" in text
    assert "default: the in-cluster configuration]" in text
    assert "the first of --node, $PROBEMARKER_NODE, $NODE_NAME" in text


def test_a_context_without_a_kubeconfig_is_refused() -> None:
    """It was ignored: the daemon went for the in-cluster configuration."""
    with pytest.raises(SettingsError, match="--context names a kubeconfig context, but no"):
        parse_run_settings(["--node", "n", "--context", "prod"], {})
    assert parse_run_settings(["--node", "n", "--context", "prod"], {"KUBECONFIG": "/k"})
