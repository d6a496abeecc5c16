"""Benchmark: the power sampler on a real GPU, under a bandwidth-bound stand-in for batch-1 decode.

Not a test: prints figures. Run from the repository root: `python -m tests.bench_power [GiB] [seconds]`.
Each step is one matrix-vector product over a BF16 weight matrix of GiB gibibytes, so, like a batch-1
decode step, it reads every weight once and is bound by memory bandwidth. The loop runs twice for
the same time: without the sampler, then with it reading NVML every 100 ms into power.jsonl. The
figures come from the same functions as a run's summary (harness.metrics.energy, and the ceiling
table of harness.metrics.roofline): steps/s both ways (the sampler's cost to the loop), achieved
GB/s against the device's ceiling, joules per step, mean and peak watts, samples taken.
Without an NVIDIA GPU and nvidia-ml-py it says what is missing and measures nothing.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from harness.metrics.energy import run_energy
from harness.metrics.roofline import ceiling
from harness.power.sampler import PowerSampler, load_power_samples
from harness.power.sensors import nvml_sensors


def decode_loop(weights, vector, seconds: float) -> tuple[int, int, int]:
    """(steps, start ns, end ns) of matrix-vector products for about `seconds`, GPU drained at the end."""
    import torch

    steps, start = 0, time.perf_counter_ns()
    deadline = start + seconds * 1e9
    while time.perf_counter_ns() < deadline:
        for _ in range(50):
            torch.mv(weights, vector)
        steps += 50
        torch.cuda.synchronize()
    return steps, start, time.perf_counter_ns()


def main(gib: float = 8.0, seconds: float = 20.0) -> None:
    try:
        import torch
    except ImportError:
        print("not measured: torch is not installed")
        return
    sensors, why = nvml_sensors()
    if not torch.cuda.is_available() or not sensors:
        print(f"not measured: {why or 'no CUDA device for torch'}")
        return
    columns = 8192
    weights = torch.randn(int(gib * 2**30 / 2 / columns), columns, device="cuda", dtype=torch.bfloat16)
    vector = torch.randn(columns, device="cuda", dtype=torch.bfloat16)
    step_bytes = weights.numel() * weights.element_size()
    decode_loop(weights, vector, 2.0)  # warm-up: clocks up, kernels loaded
    plain_steps, plain_start, plain_end = decode_loop(weights, vector, seconds)
    with tempfile.TemporaryDirectory() as folder:
        sampler = PowerSampler(sensors[:1], Path(folder) / "power.jsonl", 0.1)
        sampler.start()
        steps, start, end = decode_loop(weights, vector, seconds)
        sampler.stop()
        samples = load_power_samples(Path(folder))
    window = pd.DataFrame({"sent_ns": [start], "end_ns": [end], "completion_tokens": [steps]})
    energy = run_energy(window, samples, [sensors[0].info.to_dict()])
    peak, source = ceiling(sensors[0].info.device)
    plain_rate, rate = plain_steps / ((plain_end - plain_start) / 1e9), steps / ((end - start) / 1e9)
    print(f"device: {sensors[0].info.device} (NVML), ceiling {peak:g} GB/s [{source}]")
    print(f"step: one BF16 matrix-vector product reading {step_bytes / 1e9:.3f} GB")
    print(f"steps/s without sampling {plain_rate:.1f}, with sampling every 100 ms {rate:.1f} "
          f"({(rate / plain_rate - 1) * 100:+.2f}%)")
    print(f"achieved {step_bytes * rate / 1e9:.0f} GB/s = {step_bytes * rate / 1e9 / peak:.0%} of the ceiling")
    print(f"energy {energy['gpu_energy_j']:.1f} J over {(end - start) / 1e9:.1f} s: "
          f"{energy['gpu_energy_per_output_token_j']:.4f} J per step, {energy['gpu_output_tokens_per_j']:.2f} steps/J, "
          f"mean {energy['gpu_power_mean_w']:.0f} W, peak {energy['gpu_power_peak_w']:.0f} W "
          f"({sampler.samples} samples of {sensors[0].info.method})")


if __name__ == "__main__":
    main(*(float(a) for a in sys.argv[1:3]))
