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
