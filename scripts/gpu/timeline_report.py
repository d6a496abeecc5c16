"""The timeline step's figures: one run's timeline figure and what the GPU did during its decode.

Usage: `python scripts/gpu/timeline_report.py RESULTS_DIR OUT_DIR`. Loads the one run under
RESULTS_DIR, writes its timeline figure (`timeline.png`) into OUT_DIR and prints, per GPU, the NVML
readings inside the measured window (median and highest utilisation, SM and memory clocks, power),
how the server's running requests agreed with the client's requests in flight, and the warnings.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from harness.analysis.run import Run
from harness.analysis.telemetry import in_flight_check, measured_window, telemetry_warnings
from harness.report.timeline import plot_run_timeline

METRICS = ("gpu_util_pct", "sm_clock_mhz", "memory_clock_mhz", "power_w", "temperature_c", "throttle_reasons")


def main(results: Path, out: Path) -> None:
    [run_dir] = [p.parent for p in results.glob("*/manifest.json")]
    run = Run.load(run_dir)
    png = next(p for p in plot_run_timeline(run, out / "figures") if p.suffix == ".png")
    shutil.copy(png, out / "timeline.png")
    device = run.record.telemetry.device
    print(f"run {run.run_id}: {run.caption}; device sampling {device.status}: {device.gpus or device.as_recorded()}")
    samples, window = run.device_samples, measured_window(run)
    inside = samples[(samples["t_ns"] >= window[0]) & (samples["t_ns"] <= window[1])]
    for (gpu, metric), rows in inside[inside["metric"].isin(METRICS)].groupby(["gpu", "metric"]):
        values = rows["value"]
        print(f"GPU {gpu} {metric:>16}: median {values.median():10.1f}  max {values.max():10.1f}  "
              f"min {values.min():10.1f}  samples {len(values)}")
    check = in_flight_check(run)
    if check.empty:
        print("no scrape fell inside the measured window")
    else:
        agree = (check["server_running"] + check["server_queued"] == check["client_in_flight"]).mean()
        print(f"server running + queued = client in flight at {agree:.0%} of {len(check)} scrapes in the window")
    print("roles scraped:", sorted(set(run.server_metrics["role"])))
    print("warnings:", telemetry_warnings(run) or "none")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
