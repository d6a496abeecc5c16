"""What the server and the GPU were doing while a run's requests ran.

`server` scrapes the engine's `GET /metrics` at an interval, keeping the series its adapter names
(`harness.engines.series`); `device` reads every NVIDIA GPU through NVML (utilisation, clocks,
temperature, power, memory, clock-throttle reasons); `sampling` runs both in background threads
from the warm-up to the end of the measured requests and marks the measured window. Rows go to the
run folder through `harness.records.timeseries`. Nothing here is imported by the client.
"""
