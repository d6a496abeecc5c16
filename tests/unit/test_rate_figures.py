"""Runs by offered rate: the points table from a long summary, where attainment crosses a target,
and the figures (written, and saying "not measured" where no SLO was given)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from harness.analysis.rates import RATE_FIGURES, attainment_crossing, rate_points
from harness.report.rate_plots import NOT_MEASURED, plot_capacity, plot_rates


def summary_rows(configuration: str, rate: float, attainment: float | None) -> list[dict]:
    values = {"offered_rate_rps": ("value", rate * 0.98), "achieved_rate_rps": ("value", rate * 0.97),
              "response_ttft_ms": ("p50", 10 * rate), "tpot_ms": ("p50", 5.0), "output_throughput": ("value", 40 * rate)}
    rows = [{"metric": metric, "stat": stat, "value": value} for metric, (stat, value) in values.items()]
    if attainment is not None:
        rows += [{"metric": "slo_attainment", "stat": stat, "value": value}
                 for stat, value in (("mean", attainment), ("ci95_low", attainment - 0.05),
                                     ("ci95_high", min(1.0, attainment + 0.05)))]
        rows.append({"metric": "goodput_rps", "stat": "value", "value": rate * attainment})
    return [{"configuration": configuration, "workload": "synthetic", "request_rate": rate, **row} for row in rows]


def summary(attained: bool = True) -> pd.DataFrame:
    curve = {1.0: 1.0, 2.0: 1.0, 4.0: 0.995, 8.0: 0.9, 16.0: 0.5}
    rows = [row for rate, share in curve.items() for row in summary_rows("plain", rate, share if attained else None)]
    rows += [row for rate, share in curve.items() for row in summary_rows("spec", rate, 1.0 if attained else None)]
    return pd.DataFrame(rows)


def test_one_point_per_run_with_every_figure():
    points = rate_points(summary())
    assert list(points.columns) == ["configuration", "workload", "request_rate", *RATE_FIGURES]
    plain = points[points["configuration"] == "plain"].set_index("request_rate")
    assert plain.loc[8.0, "slo_attainment"] == 0.9 and plain.loc[8.0, "achieved_rps"] == pytest.approx(7.76)
    assert plain["response_e2e_p95_ms"].isna().all()  # not in the summary: not measured, not zero


def test_the_crossing_is_between_the_last_rate_meeting_the_target_and_the_first_missing_it():
    crossing = attainment_crossing(rate_points(summary()), 0.99).set_index("configuration")
    assert (crossing.loc["plain", "last_meeting"], crossing.loc["plain", "first_missing"]) == (4.0, 8.0)
    assert crossing.loc["spec", "last_meeting"] == 16.0 and math.isnan(crossing.loc["spec", "first_missing"])


def test_the_figures_are_written_and_say_when_no_slo_was_measured(tmp_path):
    written = plot_rates(rate_points(summary()), tmp_path / "with", reduced=True, target=0.99)
    assert sorted(p.name for p in written if p.suffix == ".png") == ["rate_achieved.png", "rate_goodput.png",
                                                                      "rate_latency.png"]
    plot_rates(rate_points(summary(attained=False)), tmp_path / "without", reduced=False)
    assert NOT_MEASURED in (tmp_path / "without" / "rate_goodput.svg").read_text(encoding="utf-8")
    assert plot_rates(rate_points(pd.DataFrame(columns=["configuration", "workload", "request_rate", "metric",
                                                        "stat", "value"])), tmp_path, reduced=False) == []


def test_the_capacity_figure_shades_its_bracket(tmp_path):
    trials = pd.DataFrame({"rate": [1.0, 16.0, 4.0, 8.0, 4.0], "attainment": [1.0, 0.5, 0.995, 0.9, 0.995],
                           "ci95_low": [0.96, 0.4, 0.97, 0.85, 0.97], "ci95_high": [1.0, 0.6, 1.0, 0.95, 1.0],
                           "role": ["floor", "ceiling", "search", "search", "confirmation"]})
    written = plot_capacity(trials, (4.0, 8.0), 0.99, tmp_path, reduced=False)
    assert "bracket [4, 8] req/s" in written[1].read_text(encoding="utf-8")


def curve(attainments: dict[float, float]) -> pd.DataFrame:
    return pd.DataFrame([{"configuration": "c", "workload": "w", "request_rate": rate, "slo_attainment": value}
                         for rate, value in attainments.items()])


def test_a_rate_that_meets_the_target_again_after_a_miss_is_not_the_last_meeting():
    """Attainment 0.99, 0.80, 0.95, 0.70 at 1-4 req/s against 0.9: the crossing is between 1 and 2."""
    crossing = attainment_crossing(curve({3.0: 0.95, 1.0: 0.99, 4.0: 0.70, 2.0: 0.80}), 0.9).iloc[0]
    assert (crossing["last_meeting"], crossing["first_missing"]) == (1.0, 2.0)


def test_attainment_exactly_at_the_target_meets_it():
    crossing = attainment_crossing(curve({1.0: 0.99, 2.0: 0.9, 3.0: 0.5}), 0.9).iloc[0]
    assert (crossing["last_meeting"], crossing["first_missing"]) == (2.0, 3.0)


def test_a_rate_whose_attainment_was_not_measured_is_not_the_last_meeting():
    """No SLO figure at 2 req/s (no ok request there): nothing says it met the target."""
    crossing = attainment_crossing(curve({1.0: 0.99, 2.0: math.nan, 3.0: 0.5}), 0.9).iloc[0]
    assert (crossing["last_meeting"], crossing["first_missing"]) == (1.0, 3.0)
