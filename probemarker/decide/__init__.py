"""Decide: a probe's run -> its state (thresholds, docs/engine.md) and the result it stands
for (`decide.py`). Pure: no clock, no I/O; the engine passes the outcome in."""
