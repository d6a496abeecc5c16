"""Device power and energy, sampled beside the measured requests.

`sensors` finds what this machine can read (NVML for NVIDIA GPUs, RAPL powercap for CPU packages),
`sampler` reads them in a background thread into `power.jsonl`; `harness.metrics.energy` turns the
samples into joules per output token. Nothing here is imported by the client.
"""
