"""daemon/settings.py: flags win over PROBEMARKER_* variables, which win over defaults."""

from __future__ import annotations

from dataclasses import fields

import pytest

from probemarker.daemon.settings import (
    RunSettings,
    SettingsError,
    env_name,
    flag_name,
    parse_run_settings,
)


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
        pytest.param(
            "", "must not be empty; unset it to use the default (all namespaces)", id="empty-flag"
        ),
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

    from probemarker.daemon.settings import add_arguments

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
        "--status-socket PATH",
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


SETTINGS = [item.name for item in fields(RunSettings)]


@pytest.mark.parametrize("name", SETTINGS)
@pytest.mark.parametrize("text", ["", "  "])
def test_an_empty_variable_is_refused_like_an_empty_flag(name: str, text: str) -> None:
    """An empty PROBEMARKER_* variable was taken as unset: PROBEMARKER_EXEC_BACKEND="" in
    a cri overlay silently ran the api backend, PROBEMARKER_METRICS_ADDRESS="" listened
    on every interface."""
    variable, flag = env_name(name), flag_name(name)
    with pytest.raises(SettingsError) as by_env:
        parse_run_settings([] if name == "node" else ["--node", "n"], {variable: text})
    assert str(by_env.value).startswith(f"{variable}={text!r}: must not be empty; unset it")
    with pytest.raises(SettingsError) as by_flag:
        parse_run_settings(["--node", "n", f"{flag}={text}"], {})
    assert str(by_flag.value).startswith(f"{flag}={text!r}: must not be empty; unset it")


def test_an_empty_variable_says_what_unset_means() -> None:
    with pytest.raises(SettingsError) as caught:
        parse_run_settings(["--node", "n"], {"PROBEMARKER_EXEC_BACKEND": ""})
    assert str(caught.value) == (
        "PROBEMARKER_EXEC_BACKEND='': must not be empty; unset it to use the default (api)"
    )


def test_kubectls_empty_kubeconfig_variable_still_means_unset() -> None:
    """KUBECONFIG is kubectl's, read as kubectl reads it: empty is unset."""
    assert parse_run_settings(["--node", "n"], {"KUBECONFIG": ""}).kubeconfig is None


@pytest.mark.parametrize(
    ("argv", "env", "source", "text"),
    [
        pytest.param(["--node", "a,b"], {}, "--node", "a,b", id="list"),
        pytest.param(["--node", "node 1"], {}, "--node", "node 1", id="space"),
        pytest.param(["--node", "Node-1"], {}, "--node", "Node-1", id="upper-case"),
        pytest.param(["--node=-node"], {}, "--node", "-node", id="leading-dash"),
        pytest.param(["--node", "n" * 254], {}, "--node", "n" * 254, id="too-long"),
        pytest.param([], {"PROBEMARKER_NODE": "a b"}, "PROBEMARKER_NODE", "a b", id="variable"),
        pytest.param([], {"NODE_NAME": "Worker_1"}, "NODE_NAME", "Worker_1", id="downward-api"),
    ],
)
def test_a_node_name_that_names_no_node_is_refused(
    argv: list[str], env: dict[str, str], source: str, text: str
) -> None:
    """It was accepted: the field selector matched no pod and the daemon reported ready
    while watching nothing."""
    with pytest.raises(SettingsError) as caught:
        parse_run_settings(argv, env)
    assert str(caught.value).startswith(f"{source}={text!r}: must be a node's name: it must")


@pytest.mark.parametrize("name", ["node-1", "ip-10-0-0-1.ec2.internal", "a" * 253, "1"])
def test_node_names_are_dns_subdomains(name: str) -> None:
    assert parse_run_settings(["--node", name], {}).node == name


@pytest.mark.parametrize(
    ("flag", "text", "accepted"),
    [
        pytest.param("--write-qps", "1e-300", "0.01 and 10000", id="qps-that-never-writes"),
        pytest.param("--event-qps", "0.001", "0.01 and 10000", id="event-qps-too-low"),
        pytest.param("--write-qps", "1e6", "0.01 and 10000", id="qps-unbounded"),
        pytest.param("--write-burst", "0", "1 and 10000", id="burst-zero"),
        pytest.param("--event-burst", "100001", "1 and 10000", id="burst-too-high"),
        pytest.param("--max-concurrent-probes", "0", "1 and 10000", id="no-probes"),
        pytest.param("--max-concurrent-probes", "1000000", "1 and 10000", id="probes"),
        pytest.param("--cleanup-delay-seconds", "1e308", "0 and 86400", id="cleanup-never"),
        pytest.param("--message-refresh-seconds", "-1", "0 and 86400", id="refresh-negative"),
        pytest.param("--write-coalesce-seconds", "60", "0 and 10", id="coalesce"),
        pytest.param("--shutdown-grace-seconds", "3601", "0 and 600", id="shutdown"),
    ],
)
def test_numbers_outside_their_range_are_refused(flag: str, text: str, accepted: str) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_run_settings(["--node", "n", flag, text], {})
    assert str(caught.value) == f"{flag}={text!r}: must be between {accepted}"


@pytest.mark.parametrize(
    ("flag", "text", "field", "value"),
    [
        pytest.param("--write-qps", "0.01", "write_qps", 0.01, id="qps-low"),
        pytest.param("--write-qps", "10000", "write_qps", 10000.0, id="qps-high"),
        pytest.param("--cleanup-delay-seconds", "0", "cleanup_delay_seconds", 0.0, id="zero"),
        pytest.param(
            "--cleanup-delay-seconds", "86400", "cleanup_delay_seconds", 86400.0, id="day"
        ),
        pytest.param("--max-concurrent-probes", "1", "max_concurrent_probes", 1, id="one"),
    ],
)
def test_the_bounds_themselves_are_accepted(flag: str, text: str, field: str, value: float) -> None:
    assert getattr(parse_run_settings(["--node", "n", flag, text], {}), field) == value


def test_help_shows_each_numbers_range(monkeypatch: pytest.MonkeyPatch) -> None:
    text = run_help(monkeypatch)
    assert "one write each while several wait (docs/kube-writes.md); 0.01 to 10000" in text
    assert "fewest runs (docs/engine.md); 1 to 10000" in text


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("0.3", "whole steps"),
        ("1", "from 0.001 to 0.5"),
        ("1e-310", "from 0.001 to 0.5"),
        ("-0.25", "from 0.001 to 0.5"),
    ],
)
def test_a_phase_step_that_is_no_whole_fraction_of_a_second_is_refused(
    text: str, needle: str
) -> None:
    with pytest.raises(SettingsError, match=needle):
        parse_run_settings(["--node", "n", "--probe-phase-step-seconds", text], {})


@pytest.mark.parametrize(("text", "step"), [("0", 0.0), ("0.5", 0.5), ("0.1", 0.1)])
def test_phase_steps_parse(text: str, step: float) -> None:
    settings = parse_run_settings(["--node", "n", "--probe-phase-step-seconds", text], {})
    assert settings.probe_phase_step_seconds == step
