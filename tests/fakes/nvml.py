"""A test double of the `pynvml` module: GPUs whose readings a test sets, and can make refuse.

`FakeNvml(gpus)` takes one dict per GPU of metric -> value (the names of
`harness.telemetry.device.READINGS`); a metric set to `NOT_SUPPORTED` raises as NVML does for a
reading the device cannot give (a GB10 has no framebuffer memory to report). `throttle_reasons`
is the clock-event bitmask NVML returns, and may be changed between samples.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

NOT_SUPPORTED = object()


class NVMLError(Exception):
    """Stands in for pynvml.NVMLError_NotSupported and its siblings."""


class FakeNvml:
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, gpus: list[dict[str, Any]], names: list[str] | None = None, init_error: str | None = None):
        self.gpus, self.init_error = gpus, init_error
        self.names = names or [f"NVIDIA Fake {i}" for i in range(len(gpus))]

    def _get(self, handle: int, metric: str) -> Any:
        value = self.gpus[handle][metric]
        if value is NOT_SUPPORTED:
            raise NVMLError("Not Supported")
        return value

    def nvmlInit(self) -> None:
        if self.init_error:
            raise NVMLError(self.init_error)

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return self.names[handle].encode()

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=self._get(handle, "gpu_util_pct"), memory=self._get(handle, "memory_util_pct"))

    def nvmlDeviceGetClockInfo(self, handle: int, clock: int) -> int:
        return self._get(handle, "sm_clock_mhz" if clock == self.NVML_CLOCK_SM else "memory_clock_mhz")

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        return self._get(handle, "temperature_c")

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return round(self._get(handle, "power_w") * 1000)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(used=self._get(handle, "memory_used_mib") * 2**20)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        return self._get(handle, "throttle_reasons")


def busy_gpu(**changes: Any) -> dict[str, Any]:
    """The readings of a GPU in the middle of a decode: busy, full clocks, no throttle."""
    return {"gpu_util_pct": 97, "memory_util_pct": 60, "sm_clock_mhz": 1980, "memory_clock_mhz": 3201,
            "temperature_c": 55, "power_w": 370.5, "memory_used_mib": 81_000, "throttle_reasons": 0} | changes
