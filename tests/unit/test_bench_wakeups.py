"""bench/wakeups.py's pure helpers (the bench itself needs a real runtime socket)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench.wakeups import context_switches, parse_groups, rotated


def test_context_switches_add_every_threads_both_kinds(tmp_path: Path) -> None:
    for tid, (voluntary, forced) in {"10": (7, 1), "11": (30, 2)}.items():
        (tmp_path / tid).mkdir()
        (tmp_path / tid / "status").write_text(
            f"Name:\tpython\nvoluntary_ctxt_switches:\t{voluntary}\n"
            f"nonvoluntary_ctxt_switches:\t{forced}\n"
        )
    assert context_switches(tmp_path) == 40


def test_context_switches_of_this_process_grow() -> None:
    before = context_switches()
    assert before > 0
    time.sleep(0.01)  # a sleep is a voluntary switch
    assert context_switches() > before


def test_every_group_goes_first_once_in_as_many_rounds() -> None:
    groups = [1, 2, 5, 10]
    orders = [rotated(groups, r) for r in range(4)]
    assert [order[0] for order in orders] == groups
    assert all(sorted(order) == groups for order in orders)


@pytest.mark.parametrize("text", ["", "0", "1,1", "a", "2,-1"])
def test_bad_groups_are_refused_naming_the_flag(text: str) -> None:
    with pytest.raises(SystemExit, match="--groups"):
        parse_groups(text)


def test_groups_parse() -> None:
    assert parse_groups("1, 5") == [1, 5]
