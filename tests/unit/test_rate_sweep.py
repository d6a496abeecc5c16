"""A sweep over arrival rates: one open-loop cell per rate, each cell's run options at its rate, the
points by rate and their figures in the sweep folder; bad rates are one line."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.errors import SparkbenchError
from harness.sweep.config import config_from_flags
from harness.sweep.outputs import write_outputs
from harness.sweep.run import execute
from harness.sweep.setup import request_rates
from harness.sweep.sweepdir import CellOutcome, SweepDir, cells_of
from tests.unit.test_sweep import _config


def _fake_rate_run(root, cell) -> str:
    path = root / f"run-{cell.cell_id}"
    path.mkdir(parents=True)
    (path / "manifest.json").write_text('{"run_id": "%s", "workload": {"name": "synthetic"}, "status": "complete"}'
                                        % path.name)
    rate = cell.request_rate
    rows = [("offered_rate_rps", "value", rate), ("achieved_rate_rps", "value", rate * 0.99),
            ("response_e2e_ms", "p95", 100 * rate), ("slo_attainment", "mean", 1.0 if rate <= 2 else 0.8)]
    pd.DataFrame([(path.name, "synthetic", *row, "") for row in rows],
                 columns=["run_id", "workload", "metric", "stat", "value", "unit"]).to_csv(path / "summary.csv",
                                                                                             index=False)
    return str(path)


class RateRunner:
    def __init__(self) -> None:
        self.settings = {}

    def __call__(self, configuration, cells, settings, report) -> None:
        for cell, root in cells:
            self.settings[cell.cell_id] = settings.cell_settings(cell.concurrency, cell.request_rate)
            report(CellOutcome(cell.cell_id, "complete", _fake_rate_run(root, cell)))


def test_one_open_loop_cell_per_rate_and_the_points_by_rate(tmp_path):
    config = _config(tmp_path, request_rate=[4.0, 0.5, 2.0], slo="e2e=1s", duration_s="30s")
    assert [c.cell_id for c in cells_of(config)][:3] == ["base.synthetic.r0.5", "base.synthetic.r2",
                                                         "base.synthetic.r4"]
    assert cells_of(config)[0].label == "base r=0.5/s"
    sweep = SweepDir.create(config)
    runner = RateRunner()
    assert execute(sweep, runner=runner) == "complete"
    cell = runner.settings["fast.synthetic.r2"]
    assert (cell.request_rate, cell.slo, cell.duration_s, cell.open_loop) == (2.0, "e2e=1000ms", 30.0, True)
    html, tables, sentences = write_outputs(SweepDir.load(sweep.path))
    assert sentences[0].startswith("every rate cell sends one arrival draw (seed 0, burstiness 1) scaled to its rate")
    assert "one arrival draw (seed 0" in html.read_text(encoding="utf-8")
    rates = pd.read_csv(sweep.path / "rates.csv")
    assert len(rates) == 6 and set(rates["request_rate"]) == {0.5, 2.0, 4.0}
    assert {p.name for p in (sweep.path / "plots").glob("*.png")} == {"rate_achieved.png", "rate_latency.png",
                                                                      "rate_goodput.png"}
    assert "Points by offered rate" in html.read_text(encoding="utf-8")


@pytest.mark.parametrize("rates, message", [([1.0, 1.0], "distinct"), ([0.0], "above 0")])
def test_bad_rates_are_one_line(tmp_path, rates, message):
    with pytest.raises(SparkbenchError, match=message):
        _config(tmp_path, request_rate=rates)


def test_rates_from_the_command_line():
    assert request_rates("0.5, 1,2") == [0.5, 1.0, 2.0] and request_rates(None) is None
    with pytest.raises(SparkbenchError, match="give numbers separated by commas"):
        request_rates("1,fast")
    config = config_from_flags(["http://127.0.0.1:1"], [], "synthetic", {}, request_rate=[2.0, 1.0])
    assert config.request_rate == [1.0, 2.0]
