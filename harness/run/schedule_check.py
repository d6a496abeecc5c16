"""A `--schedule` file checked whole before any server is asked.

The offsets are read again when the run begins (`arrivals.schedule_of`), so a bad file used to end
in a failed run folder and a `--resume` hint. Checked here first: every offset a finite number of
seconds, none negative, none before the one above it (`arrivals.read_schedule`), at least one
within `--duration`, and no run that would wait past MAX_RUN_S for its last request to end (an
offset of 10^12 s is a unit mistake, not a plan).
"""

from __future__ import annotations

from harness.engines.stream import TOTAL_BASE_S
from harness.errors import SparkbenchError
from harness.run.arrivals import read_schedule
from harness.run.options import RunSettings

MAX_RUN_S = 7 * 24 * 3600.0  # a week: the longest an open-loop run may take to send and finish


def check_schedule(options: RunSettings) -> None:
    """A one-line SparkbenchError when `options.schedule` cannot be run as given; nothing without one."""
    if options.schedule is None:
        return
    offsets = read_schedule(options.schedule)
    kept = offsets if options.duration_s is None else offsets[offsets < options.duration_s]
    if kept.size == 0:
        raise SparkbenchError(f"--schedule {options.schedule}: no offset within --duration {options.duration_s:g} s "
                              f"(the first is {offsets[0]:g} s)")
    deadline_s = options.request_deadline_s or TOTAL_BASE_S
    if kept[-1] + deadline_s > MAX_RUN_S:
        raise SparkbenchError(f"--schedule {options.schedule}: the last offset, {kept[-1]:g} s, and a request "
                              f"deadline of {deadline_s:g} s make a run longer than {MAX_RUN_S / 86400:g} days; "
                              "offsets are seconds from the start (or give --duration to cut the schedule)")
