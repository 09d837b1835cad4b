"""bench/cri_exec.py's pure helpers: what it reads from /proc and /metrics, and its
percentiles (the bench itself needs a real containerd and is not run in CI)."""

from __future__ import annotations

import os

import pytest

from bench import cri_exec
from bench.cri_exec import (
    TICKS,
    is_shim_of,
    metric,
    parse_metrics,
    percentile,
    spread,
    stat_cpu,
)

SOCKET = "/run/pmcri.abc/containerd.sock"


def _stat(comm: str, utime: int, stime: int, cutime: int, cstime: int) -> str:
    # /proc/PID/stat: pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
    # majflt cmajflt utime stime cutime cstime priority ...
    return f"4242 ({comm}) S 1 4242 4242 0 -1 4194560 10 20 0 0 {utime} {stime} {cutime} {cstime} 20 0 12 0"


def test_stat_cpu_reads_own_and_reaped_children_after_the_command() -> None:
    # A command may hold spaces and parentheses: the fields start after the last ")".
    stat = _stat("containerd-shim) (x", 7, 3, 50, 40)
    assert stat_cpu(stat, children=False) == pytest.approx(10 / TICKS)
    assert stat_cpu(stat, children=True) == pytest.approx(100 / TICKS)


def test_stat_cpu_of_this_process_is_what_the_kernel_says() -> None:
    with open(f"/proc/{os.getpid()}/stat") as f:
        own = stat_cpu(f.read(), children=False)
    times = os.times()
    assert own == pytest.approx(times.user + times.system, abs=2 / TICKS)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(
            [
                "/usr/bin/containerd-shim-runc-v2",
                "-namespace",
                "k8s.io",
                "-id",
                "ab12",
                "-address",
                SOCKET,
            ],
            True,
            id="its-shim",
        ),
        pytest.param(
            ["/usr/bin/containerd-shim-runc-v2", "-namespace", "k8s.io", "-address", SOCKET + "2"],
            False,
            id="another-socket-sharing-a-prefix",
        ),
        pytest.param(
            ["/usr/bin/containerd-shim-runc-v2", "-address", "/run/containerd/containerd.sock"],
            False,
            id="another-runtime",
        ),
        pytest.param(["containerd", "--config", SOCKET], False, id="containerd-itself"),
        pytest.param(["/usr/bin/containerd-shim-runc-v2", SOCKET], False, id="not-after-address"),
        pytest.param([], False, id="a-kernel-thread"),
    ],
)
def test_is_shim_of(argv: list[str], expected: bool) -> None:
    cmdline = b"".join(a.encode() + b"\0" for a in argv)
    assert is_shim_of(cmdline, SOCKET) is expected


EXPOSITION = """\
# HELP probemarker_probe_runs_total Probe runs by kind and result.
# TYPE probemarker_probe_runs_total counter
probemarker_probe_runs_total{kind="exec",result="Succeeded"} 321.0
probemarker_probe_runs_total{kind="exec",result="Failed"} 4.0
probemarker_probe_runs_total{kind="httpGet",result="Succeeded"} 99.0
probemarker_probe_duration_seconds_bucket{kind="exec",le="+Inf"} 325.0
probemarker_probe_duration_seconds_sum{kind="exec"} 9.75
probemarker_probe_duration_seconds_count{kind="exec"} 325.0
probemarker_build_info{python="3.11.7",version="0.1 \\"dev\\", x"} 1.0
probemarker_event_loop_lag_seconds 0.0012
"""


def test_parse_metrics_sums_the_samples_whose_labels_match() -> None:
    samples = parse_metrics(EXPOSITION)
    assert metric(samples, "probemarker_probe_runs_total", kind="exec") == 325
    assert metric(samples, "probemarker_probe_runs_total", kind="exec", result="Failed") == 4
    assert metric(samples, "probemarker_probe_runs_total") == 424
    assert metric(samples, "probemarker_probe_duration_seconds_sum", kind="exec") == 9.75
    assert metric(samples, "probemarker_event_loop_lag_seconds") == 0.0012
    assert metric(samples, "probemarker_probe_runs_total", kind="grpc") == 0
    assert metric(samples, "probemarker_build_info", python="3.11.7") == 1  # escaped quotes


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(100, 0, -1)]  # 100 .. 1, unsorted on purpose
    assert percentile(values, 0.5) == 51  # rank round(0.5 * 99) = 50 (0-based)
    assert percentile(values, 0.99) == 99
    assert percentile(values, 1.0) == 100
    assert percentile([3.0], 0.99) == 3


@pytest.mark.parametrize(
    ("values", "shown"),
    [
        ([1317.4], "1317 (one window)"),
        ([1300.0, 1150.0, 1544.0], "1300 (1150-1544) over 3"),
        ([2950.0, 3100.0], "3025 (2950-3100) over 2"),
    ],
)
def test_a_figure_over_windows_is_its_median_and_range(values: list[float], shown: str) -> None:
    assert spread(values) == shown


def test_idle_variants_take_turns_going_first() -> None:
    variants = cri_exec.idle_variants(("api", "cri"), [0.0, 0.25])
    assert variants == [("api", 0.0), ("api", 0.25), ("cri", 0.0), ("cri", 0.25)]
    orders = [cri_exec.idle_order(variants, r) for r in range(4)]
    assert [order[0] for order in orders] == variants  # each goes first once
    assert all(sorted(order) == sorted(variants) for order in orders)


@pytest.mark.parametrize(
    ("steps", "name"),
    [([0.25], "cri"), ([0.0, 0.25], "cri step 0.25")],
)
def test_a_variant_names_its_step_only_beside_others(steps: list[float], name: str) -> None:
    assert cri_exec.variant_name("cri", 0.25, steps) == name


@pytest.mark.parametrize("text", ["", "x", "0,0", "-1", "61", "0.25,nan"])
def test_bad_phase_steps_are_refused_naming_the_flag(text: str) -> None:
    with pytest.raises(SystemExit, match="--phase-steps"):
        cri_exec.parse_steps(text)


def test_phase_steps_parse() -> None:
    assert cri_exec.parse_steps("0, 0.25") == [0.0, 0.25]


def _window(runs: int, ok: int, transitions: int, writes: int, holds: int) -> dict[str, object]:
    return {"execs": {"runs": runs, "succeeded": ok, "transitions": transitions,
                      "pod_writes": writes, "holds_recorded": holds}}  # fmt: skip


def test_the_writes_line_sets_pod_writes_beside_transitions_over_the_windows() -> None:
    windows = [_window(100, 90, 20, 20, 0), _window(100, 96, 8, 9, 1)]
    assert cri_exec.writes_line(windows) == (
        "pod writes 29 (1.04 a transition), transitions 28, runs not Succeeded 14, "
        "exec holds recorded 1"
    )
    assert cri_exec.writes_line([_window(50, 50, 0, 0, 0)]) == (
        "pod writes 0, transitions 0, runs not Succeeded 0, exec holds recorded 0"
    )


def test_exec_figures_take_the_writes_from_the_daemons_metrics() -> None:
    before = parse_metrics(
        'probemarker_transitions_total{state="Failed"} 3\n'
        'probemarker_pod_writes_total{outcome="written"} 10\n'
        'probemarker_pod_writes_total{outcome="Conflict"} 1\n'
        "probemarker_exec_holds_recorded_total 0\n"
    )
    after = parse_metrics(
        'probemarker_transitions_total{state="Failed"} 5\n'
        'probemarker_transitions_total{state="Succeeded"} 2\n'
        'probemarker_pod_writes_total{outcome="written"} 14\n'
        'probemarker_pod_writes_total{outcome="Conflict"} 3\n'
        "probemarker_exec_holds_recorded_total 1\n"
    )
    out = cri_exec._exec_figures(before, after)
    assert (out["transitions"], out["pod_writes"], out["holds_recorded"]) == (4, 4, 1)
