"""A `--schedule` file checked whole before any server is asked.

The offsets are read again when the run begins (`arrivals.schedule_of`), so a bad file used to end
in a failed run folder and a `--resume` hint. Checked here first: every offset a finite number of
seconds, none negative, none before the one above it (`arrivals.read_schedule`), at least one
within `--duration`, and no run that would wait past MAX_RUN_S for its last request to end (an
offset of 10^12 s is a unit mistake, not a plan). A trace's lengths and prefix groups
(`harness.run.trace`) are checked with the offsets, and refused for a workload that cannot make
prompts of a given length (or group): its config's `trace_columns` say which it takes.
"""

from __future__ import annotations

from harness.engines.stream import TOTAL_BASE_S
from harness.errors import SparkbenchError
from harness.run.options import RunSettings
from harness.run.trace import PREFIX_GROUP, read_trace
from workloads import WorkloadConfig

MAX_RUN_S = 7 * 24 * 3600.0  # a week: the longest an open-loop run may take to send and finish


def check_schedule(options: RunSettings, config: WorkloadConfig) -> None:
    """A one-line SparkbenchError when `options.schedule` cannot be run as given with the workload
    of `config`; nothing without a schedule."""
    if options.schedule is None:
        return
    trace = read_trace(options.schedule)
    refused = [name for name in trace.columns if name not in config.trace_columns]
    if refused:
        takers = "synthetic and shared-prefix take lengths; shared-prefix takes prefix groups"
        way = ("; replay the groups with shared-prefix, or give the trace without the column"
               if refused == [PREFIX_GROUP] and config.trace_columns else "")
        raise SparkbenchError(f"--schedule {options.schedule}: its {refused[0]} column needs a workload that makes "
                              f"prompts to order ({takers}){way}")
    offsets = trace.offsets
    kept = offsets if options.duration_s is None else offsets[offsets < options.duration_s]
    if kept.size == 0:
        raise SparkbenchError(f"--schedule {options.schedule}: no offset within --duration {options.duration_s:g} s "
                              f"(the first is {offsets[0]:g} s)")
    deadline_s = options.request_deadline_s or TOTAL_BASE_S
    if kept[-1] + deadline_s > MAX_RUN_S:
        raise SparkbenchError(f"--schedule {options.schedule}: the last offset, {kept[-1]:g} s, and a request "
                              f"deadline of {deadline_s:g} s make a run longer than {MAX_RUN_S / 86400:g} days; "
                              "offsets are seconds from the start (or give --duration to cut the schedule)")
