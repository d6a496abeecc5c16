"""The capacity search against a server of known capacity (`tests/fakes/queue_server.py`: 10 slots,
40 ms per token, a FIFO queue), through the runner's open loop: the bracket found holds the steady-state
answer of the fake's own queue model, and a run at the reported rate on a schedule the search never
used meets the target. The model is fed what this host really did (the services the slots held, the
client's send lags), and the tolerances come from it: the attainment a trial of its size can miss by
(three binomial standard deviations at the target), turned into rates by the model itself; the run
on an unseen schedule is held to the target less three standard deviations of its own effective size
(its misses cluster: a stall of the loaded host misses a run of requests)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.analysis.run import Run
from harness.records.rundir import RunDir
from harness.run.load_options import LoadOptions
from harness.run.options import RECORDED
from harness.run.runner import RunOptions, execute
from harness.sweep.capacity_dir import run_search, trial_of
from harness.sweep.capacity_settings import CapacitySettings
from harness.sweep.trial_plan import plan_trial
from tests.fakes.queue_server import SlotServer, attainment, capacity
from tests.unit.test_runner import ListWorkload

# About 45 s of real queueing against a fake whose service times a busy host stretches (it passed 3
# of 4 times at load 2.5-4): a proof to run on a quiet machine (`pytest -m slow`), not a gate.
pytestmark = pytest.mark.slow

SLOTS, PER_TOKEN_S, TOKENS = 10, 0.04, 2  # ListWorkload asks for 2 tokens: 80 ms a request
SLO_S, TARGET, REQUESTS = 0.120, 0.9, 200


def noise(requests: float) -> float:
    """The attainment a trial of `requests` may miss its true value by: 3 binomial sd at the target."""
    return 3 * math.sqrt(TARGET * (1 - TARGET) / requests)


def independent_requests(run_dir) -> float:
    """How many independent requests a run's attainment rests on: its misses come in runs (a busy
    period, a stall of the host, misses several requests in a row), so n requests whose met-or-missed
    series has lag-1 correlation r weigh as n (1 - r) / (1 + r) (an AR(1) series' effective size)."""
    judged = Run.load(run_dir).judged.sort_values("scheduled_ns")
    met = judged["slo_met"].to_numpy(dtype=float)
    r = np.corrcoef(met[:-1], met[1:])[0, 1] if met.min() < met.max() else 0.0
    return len(met) * (1 - max(r, 0.0)) / (1 + max(r, 0.0))


def send_lags(found) -> np.ndarray:
    """The send lags, s, of every measured request of the search's trials."""
    return np.concatenate([Run.load(t.run_dir).judged["send_lag_ms"].to_numpy(dtype=float) / 1000
                           for t in found.trials])


def trial_runner(server: SlotServer):
    def run_trial(plan, folder):
        options = RunOptions(base_url="http://fake", warmup=0, show_progress=False, power_sample_ms=0,
                             telemetry=False, request_rate=plan.rate, arrival_seed=plan.arrival_seed,
                             duration_s=plan.duration_s, warmup_window_s=plan.warmup_window_s,
                             slo=f"e2e={SLO_S * 1000:g}ms")
        run = RunDir.create(folder, "run", {"workload": {"name": "list"},
                                            "options": options.model_dump(mode="json", include=set(RECORDED))})
        execute(server, options, ListWorkload(1), run)
        return run.path

    return run_trial


def test_the_capacity_found_holds_on_a_server_of_known_capacity(tmp_path):
    server = SlotServer(SLOTS, PER_TOKEN_S)
    nominal = capacity(TARGET, SLO_S, SLOTS, np.array([TOKENS * PER_TOKEN_S]))  # exact sleeps: M/D/2
    settings = CapacitySettings(results=tmp_path, attainment=TARGET, tolerance=0.15, floor_rps=round(nominal / 1.5),
                                ceiling_rps=round(nominal * 1.5), confirmations=2, trial_requests=REQUESTS)
    run_trial = trial_runner(server)
    _, found = run_search(settings, run_trial, {"configuration": "fake", "slo": "e2e=120ms"}, LoadOptions())
    assert found.status == "confirmed", found.sentence()
    served, lags = np.array(server.served_s), send_lags(found)  # what this host did, its load and all
    model = {shift: capacity(TARGET + shift, SLO_S, SLOTS, served, lags) for shift in (noise(REQUESTS),
                                                                                    -noise(REQUESTS))}
    low, high = found.bracket
    assert model[noise(REQUESTS)] <= high and low <= model[-noise(REQUESTS)], (found.sentence(), model)
    assert attainment(found.capacity_rps, SLO_S, SLOTS, served, lags) >= TARGET - noise(REQUESTS)

    seeds = {t.arrival_seed for t in found.trials}
    assert len(seeds) == len(found.trials)  # every trial on a schedule of its own
    confirm = plan_trial(found.capacity_rps, 1, base_seed=10_000, requests=2 * REQUESTS,
                         service_ms=max(t.service_ms for t in found.holding()))
    assert confirm.arrival_seed not in seeds
    unseen = trial_of(run_trial(confirm, tmp_path / "unseen"), found.capacity_rps, "confirmation")
    assert unseen.passes(TARGET - noise(independent_requests(unseen.run_dir))), (unseen, found.sentence())
