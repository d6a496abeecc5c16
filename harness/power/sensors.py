"""Power and energy sensors: NVML (NVIDIA GPUs) and RAPL powercap (CPU packages).

A sensor reads one raw, unconverted figure pair per call: the device's cumulative energy counter
(in the sensor's own unit, wrapping at `wrap` where the hardware wraps) and its power draw in W
where the device reports one. Conversion and wrap-around are left to `harness.metrics.energy`, so
recorded samples stay the device's own numbers.
"""

from __future__ import annotations

import glob
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

RAPL_GLOB = "/sys/class/powercap/intel-rapl:[0-9]*"  # top-level zones only: subzones are inside them


@dataclass(frozen=True)
class SensorInfo:
    """What a sensor measures: `domain` groups sensors whose energies add up (gpu, cpu_package)."""

    sensor: str  # e.g. "nvml:0", "rapl:intel-rapl:0"
    domain: str
    device: str  # the device's own name
    method: str
    energy_unit_j: float  # joules per raw counter unit
    wrap: float | None  # raw counter value at which it wraps to 0 (None: does not wrap)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Sensor(Protocol):
    info: SensorInfo

    def read(self) -> tuple[float | None, float | None]:
        """(raw cumulative energy counter or None, power in W or None)."""


class NvmlSensor:
    """One NVIDIA GPU through NVML: total energy since driver load (mJ) and power draw (mW).

    On Ampere and newer, NVML's power figure is averaged over about one second, so peak watts from
    it are smoothed; energy comes from the counter, which is exact.
    """

    def __init__(self, nvml: Any, index: int) -> None:
        self._nvml, self._handle = nvml, nvml.nvmlDeviceGetHandleByIndex(index)
        name = nvml.nvmlDeviceGetName(self._handle)
        self.info = SensorInfo(sensor=f"nvml:{index}", domain="gpu",
                               device=name.decode() if isinstance(name, bytes) else str(name),
                               method="NVML nvmlDeviceGetTotalEnergyConsumption (mJ) and nvmlDeviceGetPowerUsage (mW)",
                               energy_unit_j=1e-3, wrap=None)

    def read(self) -> tuple[float | None, float | None]:
        energy = _nvml_call(self._nvml.nvmlDeviceGetTotalEnergyConsumption, self._handle)
        power_mw = _nvml_call(self._nvml.nvmlDeviceGetPowerUsage, self._handle)
        return energy, None if power_mw is None else power_mw / 1000


def _nvml_call(fn: Any, handle: Any) -> float | None:
    """One NVML reading; None where the device does not support it (NVMLError)."""
    try:
        return float(fn(handle))
    except Exception:  # noqa: BLE001 - pynvml raises NVMLError subclasses per status code
        return None


class RaplSensor:
    """One CPU package through Linux powercap: `energy_uj` wraps at `max_energy_range_uj`."""

    def __init__(self, zone: Path) -> None:
        self._energy = zone / "energy_uj"
        wrap = float((zone / "max_energy_range_uj").read_text())
        self.info = SensorInfo(sensor=f"rapl:{zone.name}", domain="cpu_package",
                               device=(zone / "name").read_text().strip(),
                               method="RAPL powercap energy_uj (uJ, wraps at max_energy_range_uj)",
                               energy_unit_j=1e-6, wrap=wrap)

    def read(self) -> tuple[float | None, float | None]:
        try:
            return float(self._energy.read_text()), None
        except (OSError, ValueError):
            return None, None


def nvml_sensors() -> tuple[list[Sensor], str | None]:
    """Every GPU NVML lists, or none and why (package missing, no driver, no device)."""
    try:
        import pynvml  # nvidia-ml-py, an optional dependency
    except ImportError:
        return [], "NVML: nvidia-ml-py is not installed (pip install 'sparkbench[energy]')"
    try:
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        return [], f"NVML: {type(exc).__name__}: {exc}"
    sensors = [NvmlSensor(pynvml, i) for i in range(count)]
    return [s for s in sensors if any(v is not None for v in s.read())], None if count else "NVML: no GPU"


def rapl_sensors(pattern: str = RAPL_GLOB) -> tuple[list[Sensor], str | None]:
    """Every CPU package zone whose energy counter this process can read, or none and why."""
    zones = [Path(p) for p in sorted(glob.glob(pattern))]
    if not zones:
        return [], "RAPL: no powercap zone on this machine"
    sensors: list[Sensor] = []
    for zone in zones:
        try:
            sensor = RaplSensor(zone)
        except (OSError, ValueError):
            continue
        if sensor.info.device.startswith("package") and sensor.read()[0] is not None:
            sensors.append(sensor)
    return sensors, None if sensors else "RAPL: package energy_uj is not readable (root only on most kernels)"


def discover() -> tuple[list[Sensor], list[str]]:
    """Every sensor that answers, and one line per kind of sensor that does not."""
    found, missing = [], []
    for finder in (nvml_sensors, rapl_sensors):
        sensors, why = finder()
        found += sensors
        if not sensors and why:
            missing.append(why)
    return found, missing

