"""The capacity search on made-up servers: a known capacity must end inside the bracket, within the
tolerance, confirmed; a failed confirmation moves the bracket down; the edges say what they are."""

from __future__ import annotations

import math

import pytest

from harness.sweep.capacity import Trial, search


def server_with_capacity(capacity: float, fail_confirmations: int = 0):
    """measure(rate, role): attainment 1.0 up to `capacity`, 0.9 above; the first
    `fail_confirmations` confirmation runs fail whatever the rate (a noisy run)."""
    calls = []

    def measure(rate: float, role: str) -> Trial:
        calls.append((rate, role))
        noisy = role == "confirmation" and sum(r == "confirmation" for _, r in calls) <= fail_confirmations
        return Trial(rate, 0.9 if noisy or rate > capacity else 1.0, role=role)

    return measure, calls


@pytest.mark.parametrize("capacity", [0.7, 3.3, 17.0, 49.0])
@pytest.mark.parametrize("tolerance", [0.05, 0.2])
def test_the_bracket_holds_the_capacity_within_the_tolerance(capacity, tolerance):
    measure, calls = server_with_capacity(capacity)
    found = search(measure, floor=0.5, ceiling=50.0, target=0.99, tolerance=tolerance, max_trials=20)
    low, high = found.bracket
    assert found.status == "confirmed" and found.capacity_rps == low
    assert low <= capacity < high and high / low <= 1 + tolerance
    assert calls[-1] == (low, "confirmation") and [r for _, r in calls[:2]] == ["floor", "ceiling"]
    assert "confirmed by a final run" in found.sentence()


def test_a_failed_confirmation_moves_the_bracket_down_to_the_next_rate_that_passed():
    measure, calls = server_with_capacity(10.0, fail_confirmations=1)
    found = search(measure, floor=1.0, ceiling=100.0, tolerance=0.1, max_trials=20)
    first_confirmed = next(rate for rate, role in calls if role == "confirmation")
    assert found.status == "confirmed"
    assert found.bracket[1] <= first_confirmed  # the rate whose confirmation failed is above the bracket
    assert found.capacity_rps < first_confirmed <= 10.0


def test_the_edges_and_an_exhausted_search_say_what_they_are():
    below = search(server_with_capacity(0.1)[0], floor=1.0, ceiling=10.0)
    assert below.capacity_rps is None and below.status == "below the floor" and below.bracket == (0.0, 1.0)
    above = search(server_with_capacity(99.0)[0], floor=1.0, ceiling=10.0)
    assert above.capacity_rps == 10.0 and above.bracket == (10.0, math.inf)
    assert "at least the highest rate tried" in above.sentence()
    short = search(server_with_capacity(5.0)[0], floor=1.0, ceiling=100.0, tolerance=0.01, max_trials=4)
    assert short.status == "out of trials" and short.capacity_rps is None and len(short.trials) == 4
    assert "NOT confirmed" in short.sentence()


def test_the_rates_must_make_a_bracket():
    with pytest.raises(ValueError, match="floor < ceiling"):
        search(server_with_capacity(1.0)[0], floor=5.0, ceiling=5.0)
