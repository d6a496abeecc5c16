"""The capacity search against a server of known capacity (`tests/fakes/queue_server.py`: 10 slots,
40 ms per token, a FIFO queue), through the runner's open loop: the bracket found holds the steady-state
answer of the fake's own queue model, and a run at the reported rate on a schedule the search never
used meets the target. The model is fed what this host really did (the services the slots held, the
client's send lags), and the tolerances come from it: the attainment a trial of its size can miss by
(three binomial standard deviations at the target), turned into rates by the model itself; the run
on an unseen schedule is held to the target less three standard deviations of its own effective size
(its misses cluster: a stall of the loaded host misses a run of requests).

The queue model itself is held to figures worked out by hand from queueing theory, not to its own
output: M/D/1 (a request meets an SLO just over its service time only when it finds the server
free, probability 1 - rho by PASTA), M/M/1 (the response time is exponential at mu - lambda) and
M/M/2 (Erlang C)."""

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


MODEL_TOLERANCE = 0.015  # the model's one draw of 18,000 judged arrivals: its attainment within 1.5 points


@pytest.mark.parametrize("rate, expected", [(2.0, 0.8), (5.0, 0.5), (8.0, 0.2)])
def test_the_model_finds_an_m_d_1_server_free_one_minus_rho_of_the_time(rate, expected):
    """One slot, 100 ms exact, an SLO just over the service: met only without a wait, 1 - rate * 0.1."""
    assert attainment(rate, 0.1001, 1, np.array([0.1])) == pytest.approx(expected, abs=MODEL_TOLERANCE)


def test_the_models_capacity_at_m_d_1_is_where_half_the_requests_wait():
    """1 - rho = 0.5 at rho = 0.5: 5 req/s for a 100 ms service."""
    assert capacity(0.5, 0.1001, 1, np.array([0.1])) == pytest.approx(5.0, rel=0.03)


EXPONENTIAL_100MS = np.random.default_rng(1).exponential(0.1, 20_000)  # mu = 10 req/s a slot


@pytest.mark.parametrize("rate, expected", [(2.0, 0.9093), (5.0, 0.7769)])  # 1 - exp(-(10 - rate) * 0.3)
def test_the_models_m_m_1_response_time_is_exponential_at_mu_minus_lambda(rate, expected):
    assert attainment(rate, 0.3, 1, EXPONENTIAL_100MS) == pytest.approx(expected, abs=MODEL_TOLERANCE)


def test_the_models_m_m_1_capacity_is_where_the_exponential_meets_the_target():
    """1 - exp(-(10 - rate) * 0.3) = 0.9 at rate = 10 - ln(10) / 0.3 = 2.325 req/s."""
    assert capacity(0.9, 0.3, 1, EXPONENTIAL_100MS) == pytest.approx(2.325, rel=0.03)


def test_the_models_m_m_2_attainment_is_erlang_cs():
    """Two slots, mu = 10, lambda = 12 (a = 1.2), SLO 250 ms. Erlang C: (a^2 / 2) * 2 / (2 - a) = 1.8
    over 1 + a + 1.8 = 4.0, so C = 0.45; P(T > t) = e^(-mu t) (1 + C (1 - e^(-mu t (c - 1 - a))) /
    (c - 1 - a)) = e^-2.5 (1 + 0.45 (1 - e^0.5) / -0.2) = 0.2019: 0.7981 met."""
    assert attainment(12.0, 0.25, 2, EXPONENTIAL_100MS) == pytest.approx(0.7981, abs=MODEL_TOLERANCE)


# About 45 s of real queueing against a fake whose service times a busy host stretches (it passed 3
# of 4 times at load 2.5-4): a proof to run on a quiet machine (`pytest -m slow`), not a gate.
@pytest.mark.slow
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
