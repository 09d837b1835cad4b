"""kit/repeats.py: one line per kind per interval, the rest counted (pure)."""

from __future__ import annotations

from probemarker.kit.repeats import Repeats


def test_the_first_is_logged_the_rest_counted_until_the_interval_passes() -> None:
    repeats = Repeats(interval=60.0)
    assert repeats.due("k", 0.0) == 0
    assert repeats.due("k", 1.0) is None
    assert repeats.due("k", 59.9) is None
    assert repeats.due("other", 2.0) == 0  # kinds are apart
    assert repeats.due("k", 60.0) == 2  # two held back since the last line


def test_fields_say_held_back_only_when_something_was() -> None:
    repeats = Repeats(interval=10.0)
    assert repeats.fields("k", 0.0) == {}
    assert repeats.fields("k", 5.0) is None
    assert repeats.fields("k", 10.0) == {"held_back": 1}
    assert repeats.fields("k", 20.0) == {}


def test_clear_logs_the_next_at_once() -> None:
    repeats = Repeats(interval=60.0)
    repeats.due("k", 0.0)
    repeats.due("k", 1.0)
    repeats.clear("k")
    assert repeats.fields("k", 2.0) == {}


def test_past_max_keys_the_key_logged_least_recently_is_forgotten() -> None:
    repeats = Repeats(interval=60.0, max_keys=2)
    assert repeats.due("a", 0.0) == 0
    assert repeats.due("b", 1.0) == 0
    assert repeats.due("a", 61.0) == 0  # a is logged again: b is now the oldest
    assert repeats.due("c", 62.0) == 0  # a third key: b is forgotten
    assert repeats.due("a", 63.0) is None  # a is still remembered
    assert repeats.due("b", 64.0) == 0  # b is new again: logged at once
