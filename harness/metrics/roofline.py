"""Decode roofline at batch 1: bytes one decode step reads, the bandwidth that implies, and the
device's ceiling.

achieved_gbps = `bytes_per_step / step_s / 1e9`, where bytes_per_step = weight bytes
(`harness.metrics.model_bytes`) + KV-cache bytes at the run's mean decode context, and step_s the
measured time of one decode step (`1 / decode_throughput_aggregate` for a run that decodes one
token per step). fraction_of_peak = `achieved_gbps / peak_gbps`. A step also reads activations and
writes the new KV entry; those are small at batch 1 and not counted, so achieved_gbps is a lower
bound of the traffic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.metrics.model_bytes import DTYPE_BYTES, Part, WeightDtypes, kv_cache_bytes, weight_parts


@dataclass(frozen=True)
class Device:
    """A device's peak memory bandwidth as its maker publishes it."""

    name: str
    peak_gbps: float
    memory: str
    source: str
    matches: tuple[str, ...]  # substrings of the name NVML (or the operator) gives the device


DEVICES = (
    Device("DGX Spark (GB10)", 273.0, "128 GB LPDDR5X, unified", "NVIDIA DGX Spark specifications "
           "(nvidia.com/en-us/products/workstations/dgx-spark)", ("GB10", "DGX SPARK")),
    Device("H200 SXM", 4800.0, "141 GB HBM3e", "NVIDIA H200 product page (nvidia.com/en-us/data-center/h200)",
           ("H200",)),
    Device("H100 PCIe", 2000.0, "80 GB HBM2e", "NVIDIA H100 datasheet (nvidia.com/en-us/data-center/h100)",
           ("H100 PCIE",)),
    Device("H100 SXM", 3350.0, "80 GB HBM3", "NVIDIA H100 datasheet (nvidia.com/en-us/data-center/h100)",
           ("H100",)),
    Device("A100 80GB SXM", 2039.0, "80 GB HBM2e", "NVIDIA A100 datasheet (nvidia.com/en-us/data-center/a100)",
           ("A100-SXM4-80GB", "A100 80GB")),
    Device("B200", 8000.0, "180 GB HBM3e", "NVIDIA HGX B200 specifications (nvidia.com/en-us/data-center/hgx)",
           ("B200",)),
)


def find_device(name: str | None) -> Device | None:
    """The first DEVICES entry whose match string is in `name` (case-insensitive), else None."""
    upper = (name or "").upper()
    return next((d for d in DEVICES if any(m in upper for m in d.matches)), None)


def ceiling(device_name: str | None, peak_gbps: float | None = None) -> tuple[float, str]:
    """(peak GB/s, where it comes from): `--peak-gbps` when given, else the DEVICES table, else NaN."""
    if peak_gbps:
        return float(peak_gbps), "--peak-gbps as given"
    device = find_device(device_name)
    if device is None:
        return math.nan, f"no known ceiling for {device_name or 'this device'} (pass --peak-gbps)"
    return device.peak_gbps, f"{device.name}: {device.memory}, {device.source}"


@dataclass(frozen=True)
class Roofline:
    """One configuration's decode step: what it reads, how long it took, and the ceiling."""

    parts: list[Part]
    kv_bytes: float
    kv_note: str
    step_ms: float
    peak_gbps: float
    peak_source: str
    notes: list[str] = field(default_factory=list)

    @property
    def weight_bytes(self) -> float:
        return sum(p.bytes for p in self.parts)

    @property
    def bytes_per_step(self) -> float:
        """Weight bytes plus KV-cache bytes (weights alone where the KV cache could not be counted)."""
        return self.weight_bytes + (self.kv_bytes if math.isfinite(self.kv_bytes) else 0.0)

    @property
    def achieved_gbps(self) -> float:
        """`bytes_per_step / (step_ms / 1000) / 1e9`."""
        return self.bytes_per_step / self.step_ms / 1e6 if self.step_ms > 0 else math.nan

    def values(self) -> dict[str, float]:
        """The summary figures (ROOFLINE_UNITS)."""
        figures = {"roofline_weight_bytes": self.weight_bytes, "roofline_kv_cache_bytes": self.kv_bytes,
                   "roofline_bytes_per_step": self.bytes_per_step, "roofline_step_ms": self.step_ms,
                   "roofline_achieved_gbps": self.achieved_gbps}
        if self.has_ceiling:  # no known ceiling: the peak and the fraction are absent, not nan
            figures |= {"roofline_peak_gbps": self.peak_gbps,
                        "roofline_fraction_of_peak": self.achieved_gbps / self.peak_gbps}
        return figures

    @property
    def has_ceiling(self) -> bool:
        return math.isfinite(self.peak_gbps) and self.peak_gbps > 0

    def ceiling_text(self) -> str:
        if not self.has_ceiling:  # the source already reads "no known ceiling for ... (pass --peak-gbps)"
            return f"({self.peak_source})"
        return (f"of {self.peak_gbps:g} GB/s peak ({self.achieved_gbps / self.peak_gbps:.0%}) "
                f"[{self.peak_source}]")

    def lines(self) -> list[str]:
        """Every assumption and figure, one line each, for printing beside the numbers."""
        rows = [f"  {p.name}: {p.parameters:,.0f} weights x {DTYPE_BYTES[p.dtype]:g} B ({p.dtype}) = "
                f"{p.bytes / 1e6:,.3f} MB  [{p.source}]" for p in self.parts]
        kv = f"{self.kv_bytes / 1e6:,.1f} MB" if math.isfinite(self.kv_bytes) else "not counted"
        return ["bytes one decode step reads at batch 1:", *rows,
                f"  KV cache: {kv}  [{self.kv_note}]",
                f"  total {self.bytes_per_step / 1e9:.3f} GB per step; step {self.step_ms:.3f} ms; "
                f"achieved {self.achieved_gbps:.1f} GB/s {self.ceiling_text()}",
                *[f"  note: {n}" for n in self.notes]]


ROOFLINE_UNITS = {"roofline_weight_bytes": "bytes", "roofline_kv_cache_bytes": "bytes",
                  "roofline_bytes_per_step": "bytes", "roofline_step_ms": "ms", "roofline_achieved_gbps": "GB/s",
                  "roofline_peak_gbps": "GB/s", "roofline_fraction_of_peak": "fraction"}


def decode_roofline(config: Mapping[str, Any], dtypes: WeightDtypes, step_ms: float, context_tokens: float,
                    kv_dtype: str, peak: tuple[float, str], notes: list[str] | None = None) -> Roofline:
    """The roofline of one configuration from its model config, dtypes, and measured step time."""
    kv_bytes, kv_note = kv_cache_bytes(config, context_tokens, DTYPE_BYTES[kv_dtype])
    return Roofline(weight_parts(config, dtypes), kv_bytes, f"{kv_note}; {kv_dtype}", step_ms, *peak, list(notes or []))
