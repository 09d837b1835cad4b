"""probemarker.demo: `probemarker demo`, the daemon at work on a simulated cluster.

Neither the daemon nor the sim: it wires both. It starts the sim in-process, creates
pods whose containers answer the three example markers from files in a scratch
directory, applies the markers (`examples/`, copies of `manifests/examples/`), runs
the real daemon against the sim over HTTP, and plays a scripted scenario that flips
those files while a live table (or, in a pipe, one line per change) shows what the
daemon writes onto the pods. See docs/demo.md.

    examples.py    the example markers (package data), the marks they write, timings
    scenario.py    the pods, their files and the steps, as data
    model.py       pods and events -> a snapshot; two snapshots -> the changes
    view.py        snapshot, changes, summary -> text (pure)
    containers.py  the containers' stand-ins: files, exec with mapped paths, HTTP
    cluster.py     the CRD, namespaces, pods and markers created in the sim; the log file
    screen.py      the terminal: live table or plain lines
    player.py      the scenario player, and the `Show` every change goes through
    runner.py      the wiring and the clean-up
    stopping.py    Ctrl-C and SIGTERM, recorded from the command's first moment

The daemon never imports this package; this package needs the `sim` extra.
"""
