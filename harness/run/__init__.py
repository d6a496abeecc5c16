"""Running a benchmark: launch or attach to a server, drive a workload through it, record every request."""
