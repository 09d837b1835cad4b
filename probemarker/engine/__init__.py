"""The engine: the hub that joins the stages (`engine.py`: informer changes in, probe
runs scheduled, outcomes decided, desired pod state out to the writer) and the words it
says about them (`report.py`: events and log lines, one place for their wording)."""
