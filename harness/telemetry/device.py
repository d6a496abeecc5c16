"""Read every NVIDIA GPU through NVML (`nvidia-ml-py`) in a background thread.

Per GPU and sample, one tidy row per reading: `t_ns` (the client's perf_counter clock), `gpu`
(NVML index), `metric`, `value`. A reading the device does not support (NVMLError) is recorded as
not reported, once, and not asked again. On a unified-memory part such as the DGX Spark's GB10,
NVML has no framebuffer of its own to report (memory used and the memory clock come back as not
supported); the manifest lists what each GPU did not report, and `UNIFIED_MEMORY_NOTE` says why.
NVML calls release the GIL while the driver answers, so the client's event loop keeps running.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from harness.records.timeseries import SeriesWriter

MIB = 2**20
UNIFIED_MEMORY_NOTE = ("unified memory: NVML reports no device memory of its own on this part "
                       "(memory used and memory clock are not reported; the system's memory is shared)")


def _throttle_reasons(nvml: Any, handle: Any) -> float:
    """The clock-event (throttle) reasons bitmask; newer drivers name it clocks *event* reasons."""
    read = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
        nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    return float(read(handle))


# metric -> how to read it from (nvml module, device handle). Units are in the names.
READINGS: dict[str, Callable[[Any, Any], float]] = {
    "gpu_util_pct": lambda nvml, h: float(nvml.nvmlDeviceGetUtilizationRates(h).gpu),
    "memory_util_pct": lambda nvml, h: float(nvml.nvmlDeviceGetUtilizationRates(h).memory),
    "sm_clock_mhz": lambda nvml, h: float(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)),
    "memory_clock_mhz": lambda nvml, h: float(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_MEM)),
    "temperature_c": lambda nvml, h: float(nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU)),
    "power_w": lambda nvml, h: nvml.nvmlDeviceGetPowerUsage(h) / 1000,
    "memory_used_mib": lambda nvml, h: nvml.nvmlDeviceGetMemoryInfo(h).used / MIB,
    "throttle_reasons": _throttle_reasons,
}


class Gpu:
    """One GPU: its handle, name, and the readings it has refused so far."""

    def __init__(self, nvml: Any, index: int) -> None:
        self.nvml, self.index = nvml, index
        self.handle = nvml.nvmlDeviceGetHandleByIndex(index)
        name = nvml.nvmlDeviceGetName(self.handle)
        self.name = name.decode() if isinstance(name, bytes) else str(name)
        self.not_reported: dict[str, str] = {}

    def read(self, t_ns: int) -> list[dict[str, Any]]:
        rows = []
        for metric, reading in READINGS.items():
            if metric in self.not_reported:
                continue
            try:
                value = reading(self.nvml, self.handle)
            except Exception as exc:  # noqa: BLE001 - pynvml raises an NVMLError subclass per status code
                self.not_reported[metric] = f"{type(exc).__name__}: {exc}"
                continue
            rows.append({"t_ns": t_ns, "gpu": self.index, "metric": metric, "value": value})
        return rows

    def facts(self) -> dict[str, Any]:
        unified = "memory_used_mib" in self.not_reported
        return {"gpu": self.index, "name": self.name, "not_reported": dict(self.not_reported),
                **({"note": UNIFIED_MEMORY_NOTE} if unified else {})}


def nvml_gpus(nvml: Any | None = None) -> tuple[list[Gpu], str | None]:
    """Every GPU NVML lists, or none and why (package missing, no driver, no device)."""
    if nvml is None:
        try:
            import pynvml as nvml  # nvidia-ml-py, the `energy` extra
        except ImportError:
            return [], "nvidia-ml-py is not installed (pip install 'sparkbench[energy]')"
    try:
        nvml.nvmlInit()
        count = nvml.nvmlDeviceGetCount()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        return [], f"NVML: {type(exc).__name__}: {exc}"
    return [Gpu(nvml, i) for i in range(count)], None if count else "NVML lists no GPU"


class DeviceSampler:
    """Reads every GPU every `interval_s` between start() and stop() into `writer`."""

    def __init__(self, gpus: list[Gpu], writer: SeriesWriter, interval_s: float,
                 clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self.gpus, self.writer, self.interval_s, self.clock = gpus, writer, interval_s, clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="device-sampler", daemon=True)
        self.samples = 0

    def start(self) -> None:
        self.sample()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def sample(self) -> None:
        for gpu in self.gpus:
            self.writer.append(gpu.read(self.clock()))
        self.samples += 1

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()
