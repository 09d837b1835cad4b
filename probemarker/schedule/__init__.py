"""Schedule: when each probe runs, and how many run at once.

- `timing`: pure arithmetic of due times (a probe's phase from its identity, its first
  run, the next run and the slots a late run missed);
- `wheel`: the timer wheel, keyed entries with O(1) add, cancel and replace;
- `dispatcher`: the one task that starts each run when due, within a cap.
"""
