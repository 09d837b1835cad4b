"""The daemon, `probemarker run`: its settings (`settings.py`, flags and PROBEMARKER_*
variables; `settings_reference.py` renders docs/configuration.md from them), what it
shares with `probemarker check` (`assembly.py`: the connection, the client's settings,
the probe handlers), the wiring of the stages into one daemon (`app.py`, `Daemon`) and
the process around it (`process.py`, `run_daemon`: the open-files limit, the signals,
the connection)."""
