"""`probemarker demo` end to end, with the examples' fast copies (`--fast`): in a pipe it
prints every scripted change and the summary, and leaves nothing behind; Ctrl-C stops
it gracefully (exit 130), still with a summary and nothing left behind."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
import structlog

from probemarker.demo.runner import DemoOptions, run_demo
from tests.rbac_check import REPO


def in_order(lines: list[str], wanted: list[str]) -> bool:
    """Each of `wanted` ends some line, in this order."""
    found = iter(lines)
    return all(any(line.endswith(w) for line in found) for w in wanted)


async def test_the_demo_in_a_pipe_plays_every_step_and_leaves_nothing_behind(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the scratch and the sim's dir
    log = tmp_path_factory.mktemp("kept") / "daemon.log"
    logging_before = structlog.get_config()
    out, err = io.StringIO(), io.StringIO()
    with anyio.fail_after(45):
        code = await run_demo(
            DemoOptions(fast=True, log_file=str(log)),
            out=out,
            err=err,
            environ={},
            stop=anyio.Event(),
        )
    text = out.getvalue()
    assert (code, err.getvalue()) == (0, ""), text
    assert "\x1b" not in text  # no colours, no cursor movement
    lines = text.splitlines()
    for number in range(1, 6):
        assert any(f"s step {number}/5: " in line for line in lines), number
        assert any(f"s step {number} done in " in line for line in lines), number
    assert in_order(
        lines,
        [
            "games/game-0 label gameserver-idle: - -> true",
            "games/game-0 label gameserver-idle: true -> false",
        ],
    )
    assert in_order(
        lines, ["games/game-0 annotation controller.kubernetes.io/pod-deletion-cost: -10 -> 10"]
    )
    # The role is the probe's answer ({{.Result}}): the failover swaps the answers.
    assert in_order(
        lines,
        [
            "databases/db-0 label db.example.com/role: - -> primary",
            "databases/db-0 label db.example.com/role: primary -> replica",
        ],
    )
    assert in_order(
        lines,
        [
            "databases/db-1 label db.example.com/role: - -> replica",
            "databases/db-1 label db.example.com/role: replica -> primary",
        ],
    )
    assert "db.example.com/role=replica (the probe's answer, 1 success, every 1 s)" in text
    assert in_order(
        lines,
        [
            "web/web-0 condition Ready: False -> True",
            "web/web-0 condition example.com/upstream-reachable: True -> False",
            "web/web-0 condition Ready: True -> False",
            "web/web-0 condition example.com/upstream-reachable: False -> True",
            "web/web-0 condition Ready: False -> True",
        ],
    )
    assert in_order(lines, ["games/game-0 event ProbeFailed: match: busy"])
    assert "summary: the scenario played to the end, after" in text
    assert "not seen" not in text
    # 6 first decisions and 3 changes of decision (more only if a slow machine timed a
    # run out); each is one pod write, and so is each of the 2 changed answers of the
    # failover, which change no decision: the daemon writes a pod only when it changes.
    figures = re.search(r"daemon: \d+ probe runs, (\d+) transitions .*, (\d+) pod writes", text)
    assert figures is not None, text
    transitions, writes = int(figures.group(1)), int(figures.group(2))
    assert transitions >= 9
    assert writes == transitions + 2
    assert lines[-1].startswith("  left behind: nothing (")
    assert os.listdir(tmp_path) == []
    assert structlog.get_config() == logging_before
    decided = [json.loads(line) for line in log.read_text().splitlines() if "probe.decided" in line]
    assert len(decided) == 9


async def test_a_log_file_that_cannot_be_opened_is_one_line_and_nothing_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    missing = tmp_path / "no-such-dir" / "daemon.log"
    out, err = io.StringIO(), io.StringIO()
    options = DemoOptions(fast=True, log_file=str(missing))
    code = await run_demo(options, out=out, err=err, environ={}, stop=anyio.Event())
    assert code == 2
    assert err.getvalue().splitlines() == [
        f"probemarker demo: cannot open the log file {missing}: No such file or directory; "
        "name a file in a directory that exists (--log-file FILE)"
    ]
    assert os.listdir(tmp_path) == []


async def test_ctrl_c_stops_the_demo_gracefully_and_cleans_up(tmp_path: Path) -> None:
    sent: list[int] = []

    def in_step_two(pid: int, lines: list[str]) -> int:
        if sent or not any("s step 2/5: " in line for line in lines):
            return 0
        sent.append(pid)
        return 1

    code, text = await run_demo_process(tmp_path, in_step_two)
    assert code == 130, text
    assert re.search(r"summary: stopped during step [2-5] of 5, after", text), text
    assert "step 5 done" not in text
    assert text.splitlines()[-1].startswith("  left behind: nothing ("), text
    assert os.listdir(tmp_path) == []


def catches_sigterm(pid: int) -> bool:
    """Whether the process has a handler for SIGTERM (Python has none of its own: the
    demo's StopSignals is installed)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


async def run_demo_process(
    tmp_path: Path, signal_when: Callable[[int, list[str]], int]
) -> tuple[int, str]:
    """`probemarker demo --fast` in a process of its own; `signal_when(pid, lines)` is
    asked after each chunk of output (and while there is none) and returns how many
    SIGINTs to send now. Returns the exit code and the output."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp_path), "TERM": "dumb"}
    command = [sys.executable, "-m", "probemarker", "demo", "--fast"]
    lines: list[str] = []
    with anyio.fail_after(45):
        async with await anyio.open_process(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        ) as process:
            assert process.stdout is not None
            buffered = ""
            while True:
                for _ in range(signal_when(process.pid, lines)):
                    process.send_signal(signal.SIGINT)
                with anyio.move_on_after(0.01):
                    try:
                        chunk = await process.stdout.receive()
                    except anyio.EndOfStream:
                        break
                    buffered += chunk.decode()
                    *complete, buffered = buffered.split("\n")
                    lines += complete
            lines += [buffered] if buffered else []
            code = await process.wait()
    return code, "\n".join(lines)


# Stopped by a signal: 130, or killed by SIGINT itself (-2, which a shell also reports
# as 130) when the second one lands while Python is finalizing, after the summary.
STOPPED = (130, -signal.SIGINT)


async def test_ctrl_c_during_the_imports_stops_cleanly_with_a_summary(tmp_path: Path) -> None:
    """It printed a 24-76 line KeyboardInterrupt traceback and no summary (issue 22)."""
    sent: list[int] = []

    def during_imports(pid: int, lines: list[str]) -> int:
        if sent or not catches_sigterm(pid):
            return 0
        sent.append(pid)  # the demo's handler is in place, its imports have begun
        return 1

    code, text = await run_demo_process(tmp_path, during_imports)
    assert code == 130, text
    assert "Traceback" not in text, text
    assert "KeyboardInterrupt" not in text, text
    assert re.search(r"summary: stopped (before the daemon started|during step 1 of 5)", text)
    assert text.splitlines()[-1].startswith("  left behind: nothing ("), text
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("second", ["during-the-graceful-stop", "after-the-summary"])
async def test_a_double_ctrl_c_still_ends_with_the_summary_so_far(
    tmp_path: Path, second: str
) -> None:
    """A second Ctrl-C during the daemon's graceful stop cancels what is left of it (it
    used to cancel the summary too); one after the summary lands in the event loop's
    teardown, where Python's default handler raised KeyboardInterrupt."""
    then = "s stopping the daemon" if second == "during-the-graceful-stop" else "  daemon: "
    sent: list[int] = []

    def in_step_two_then(pid: int, lines: list[str]) -> int:
        if not sent and any("s step 2/5: " in line for line in lines):
            sent.append(pid)
            return 1
        if len(sent) == 1 and any(then in line for line in lines):
            sent.append(pid)
            return 1
        return 0

    code, text = await run_demo_process(tmp_path, in_step_two_then)
    assert len(sent) == 2, text
    assert code in STOPPED, text
    assert "Traceback" not in text, text
    assert "KeyboardInterrupt" not in text, text
    assert re.search(r"summary: stopped during step [2-5] of 5, after", text), text
    assert re.search(r"  daemon: \d+ probe runs", text), text
    assert text.splitlines()[-1].startswith("  left behind: nothing ("), text
    assert os.listdir(tmp_path) == []
