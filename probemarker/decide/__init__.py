"""Decide: a probe's run -> its state (thresholds, SPEC §2) and the result it stands
for (`decide.py`). Pure: no clock, no I/O; the engine passes the outcome in."""
