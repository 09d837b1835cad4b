"""The engine: the hub that joins the stages (`engine.py`: informer changes in, probe
runs scheduled, outcomes decided, desired pod state out to the writer), the settings it
runs with and the counters it keeps (`dials.py`, pure), its rows per pod and per probe
(`table.py`), the words it says about them (`report.py`: events and log lines, one place
for their wording), and what it holds, read for `probemarker status` (`inspection.py`,
into the values of `seen.py`, pure)."""
