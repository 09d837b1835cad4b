"""docs/configuration.md is what the settings object renders: regenerate it with the
command it names when a setting changes."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

from probemarker.daemon.settings import RunSettings, describe, env_name, flag_name
from probemarker.daemon.settings_reference import COMMAND, render, row

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_the_configuration_reference_is_current() -> None:
    assert DOC.read_text() == render(), f"docs/configuration.md is stale: run `{COMMAND}`"


def test_every_setting_has_a_row_with_its_flag_and_variable() -> None:
    text = render()
    for item in fields(RunSettings):
        assert f"`{flag_name(item.name)} " in text
        assert f"`{env_name(item.name)}`" in text


def test_a_pipe_in_a_help_text_does_not_break_the_table() -> None:
    doc = describe()[0]
    line = row(replace(doc, help="a | b"))
    assert line.count(" | ") == 3
    assert "a \\| b" in line
