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
    assert "confirmed by runs on unseen schedules" in found.sentence()


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


def offering(share: float, capacity: float, overloaded_above: float = math.inf):
    """measure(rate, role): a schedule that offers `share` of the rate asked; attainment 1.0 up to
    `capacity` offered, 0.9 above; overloaded (attainment still 1.0) above `overloaded_above`."""
    def measure(rate: float, role: str) -> Trial:
        offered = share * rate
        return Trial(rate, 0.9 if offered > capacity else 1.0, role=role, offered_rps=offered,
                     overloaded=offered > overloaded_above)

    return measure


def test_the_capacity_is_the_rate_offered_not_the_rate_asked():
    found = search(offering(0.89, 12.0), floor=1.0, ceiling=40.0, tolerance=0.05, max_trials=30)
    low, high = found.bracket
    assert found.status == "confirmed" and found.capacity_rps == low
    assert low <= 12.0 < high and found.asked_rps == pytest.approx(low / 0.89)
    assert f"capacity {low:.3g} req/s offered (asked {found.asked_rps:g}" in found.sentence()


def test_a_trial_whose_server_did_not_keep_up_fails_whatever_its_attainment():
    found = search(offering(1.0, 99.0, overloaded_above=8.0), floor=1.0, ceiling=40.0, tolerance=0.05,
                   max_trials=30)
    assert found.status == "confirmed" and found.capacity_rps <= 8.0 < found.bracket[1]


def test_every_confirmation_must_pass_and_their_spread_is_told():
    attained = iter([1.0, 0.9, 0.995, 0.999, 0.991, 0.992])  # floor, ceiling, then confirmations

    def measure(rate: float, role: str) -> Trial:
        return Trial(rate, next(attained), role=role, offered_rps=rate * (1.02 if role == "confirmation" else 1))

    found = search(measure, floor=1.0, ceiling=1.05, target=0.99, tolerance=0.1, confirmations=4)
    assert found.status == "confirmed" and [t.role for t in found.trials].count("confirmation") == 4
    assert found.capacity_rps == 1.0 and "5 runs on schedules of their own offered 1-1.02 req/s" in found.sentence()
    assert "attainment 99.1%-100.0%" in found.sentence()
    failing = iter([1.0, 0.9, 0.995, 0.98])
    short = search(lambda rate, role: Trial(rate, next(failing), role=role), floor=1.0, ceiling=1.05,
                   target=0.99, confirmations=3)
    assert short.status == "below the floor" and len(short.trials) == 4  # the second confirmation failed
