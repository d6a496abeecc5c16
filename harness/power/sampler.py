"""Read the power sensors in a background thread while the measured requests run.

The thread wakes every `interval_s`, reads each sensor once and appends one JSON line per sensor to
`power.jsonl` (flushed at once, like the request records): `t_ns` is `time.perf_counter_ns()`, the
same monotonic clock as the client's stamps, so samples and requests share one time axis. The
client is not touched: NVML calls go through ctypes and release the GIL, a RAPL read is one small
file; at the default 10 Hz the thread is idle nearly all the time.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from harness.power.sensors import Sensor, discover
from harness.records.requests import json_lines

POWER_NAME = "power.jsonl"
DEFAULT_INTERVAL_S = 0.1


class PowerSampler:
    """Samples `sensors` into `path` every `interval_s` seconds between start() and stop()."""

    def __init__(self, sensors: Sequence[Sensor], path: Path, interval_s: float,
                 clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self.sensors, self.path, self.interval_s, self.clock = list(sensors), path, interval_s, clock
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="power-sampler", daemon=True)
        self._file = None

    def start(self) -> None:
        self._file = self.path.open("a", encoding="utf-8")
        self.sample()  # a reading before the first request, so the window is covered from its start
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()  # and one after the last
        self._file.close()

    def sample(self) -> None:
        """One line per sensor: t_ns, sensor, energy_raw (device units), power_w (None: not reported)."""
        for sensor in self.sensors:
            t_ns = self.clock()
            energy, power = sensor.read()
            self._file.write(json.dumps({"t_ns": t_ns, "sensor": sensor.info.sensor,
                                         "energy_raw": energy, "power_w": power}) + "\n")
        self._file.flush()
        self.samples += 1

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()


@contextmanager
def power_sampling(run_path: Path, interval_s: float,
                   find: Callable[[], tuple[list[Sensor], list[str]]] | None = None) -> Iterator[dict[str, Any]]:
    """Sample every sensor that answers while the block runs; yields the manifest's `power` entry,
    completed (samples taken) when the block ends.

    status: `measured`, `not measured` (no sensor answered; `not_available` says why for each
    kind) or `off` (interval 0). Never a made-up figure: with no sensor there is no power.jsonl.
    """
    if interval_s <= 0:
        yield {"status": "off", "reason": "power sampling disabled (--power-sample-ms 0)"}
        return
    sensors, missing = (find or discover)()
    entry: dict[str, Any] = {"status": "measured" if sensors else "not measured",
                             "interval_ms": interval_s * 1000, "sensors": [s.info.to_dict() for s in sensors],
                             "not_available": missing, "file": POWER_NAME if sensors else None}
    if not sensors:
        yield entry
        return
    sampler = PowerSampler(sensors, run_path / POWER_NAME, interval_s)
    sampler.start()
    try:
        yield entry
    finally:
        sampler.stop()
        entry["samples"] = sampler.samples


SAMPLE_COLUMNS = ["t_ns", "sensor", "energy_raw", "power_w"]


def load_power_samples(run_dir: Path) -> pd.DataFrame:
    """A run's power samples (SAMPLE_COLUMNS), empty when it recorded none."""
    path = Path(run_dir) / POWER_NAME
    rows = json_lines(path) if path.exists() else []
    frame = pd.DataFrame(rows, columns=SAMPLE_COLUMNS)
    return frame.astype({"t_ns": "int64", "energy_raw": "float64", "power_w": "float64"})
