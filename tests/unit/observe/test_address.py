"""--metrics-address: what parses, what is refused and how the refusal reads."""

from __future__ import annotations

import pytest

from probemarker.daemon.settings import RunSettings, SettingsError, parse_run_settings
from probemarker.observe.address import ListenAddress, parse_listen_address


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(":9808", ListenAddress(None, 9808), id="every-interface"),
        pytest.param("127.0.0.1:0", ListenAddress("127.0.0.1", 0), id="ephemeral-port"),
        pytest.param("localhost:80", ListenAddress("localhost", 80), id="host-name"),
        pytest.param("[::1]:9808", ListenAddress("::1", 9808), id="ipv6"),
        pytest.param("[::]:9808", ListenAddress("::", 9808), id="ipv6-any"),
        pytest.param(" :65535 ", ListenAddress(None, 65535), id="blanks-around"),
        pytest.param("0", None, id="off"),
    ],
)
def test_accepted(text: str, expected: ListenAddress | None) -> None:
    assert parse_listen_address(text) == expected


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        pytest.param("9808", "a port alone is written :PORT", id="bare-port"),
        pytest.param(":http", "port 'http' is not a number from 0 to 65535", id="named-port"),
        pytest.param(":65536", "port '65536' is not a number", id="port-too-big"),
        pytest.param(":-1", "port '-1' is not a number", id="negative"),
        pytest.param(":", "port '' is not a number", id="no-port"),
        pytest.param("::1:9808", "an IPv6 address goes in brackets, as [::1]:9808", id="v6-bare"),
        pytest.param("[nope]:1", "'nope' in brackets is not an IPv6 address", id="v6-bad"),
        pytest.param("under_score:1", "'under_score' is not an IP address or host name", id="host"),
        pytest.param("", "a port alone is written", id="empty"),
        pytest.param("00", "a port alone is written", id="not-quite-off"),
    ],
)
def test_refused(text: str, needle: str) -> None:
    with pytest.raises(ValueError, match="must be HOST:PORT") as caught:
        parse_listen_address(text)
    assert needle in str(caught.value)


def test_str_writes_it_back() -> None:
    for text in (":9808", "127.0.0.1:0", "[::1]:9808"):
        parsed = parse_listen_address(text)
        assert parsed is not None
        assert str(parsed) == text


def test_the_setting_defaults_to_9808_on_every_interface() -> None:
    assert RunSettings().metrics_address == ":9808"
    assert parse_run_settings([], {"NODE_NAME": "n"}).metrics_address == ":9808"


def test_the_flag_wins_over_the_variable() -> None:
    env = {"PROBEMARKER_METRICS_ADDRESS": "0"}
    assert parse_run_settings(["--node", "n"], env).metrics_address == "0"
    settings = parse_run_settings(["--node", "n", "--metrics-address", "127.0.0.1:0"], env)
    assert settings.metrics_address == "127.0.0.1:0"


@pytest.mark.parametrize(
    ("argv", "env", "start"),
    [
        pytest.param(
            ["--metrics-address", "9808"], {}, "--metrics-address='9808': must be", id="flag"
        ),
        pytest.param(
            [],
            {"PROBEMARKER_METRICS_ADDRESS": "::1:80"},
            "PROBEMARKER_METRICS_ADDRESS='::1:80': an IPv6 address goes in brackets",
            id="variable",
        ),
    ],
)
def test_a_bad_address_is_one_line_naming_the_flag(
    argv: list[str], env: dict[str, str], start: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_run_settings(["--node", "n", *argv], env)
    message = str(caught.value)
    assert message.startswith(start)
    assert "\n" not in message
    assert "or 0 to turn the server off" in message
