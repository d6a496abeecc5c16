"""Open-loop load against the session's real SGLang server (CPU test bed, reduced scale): a short
capacity search finishes, and its bracket holds the rate where SLO attainment crosses the target in
a finer sweep over arrival rates; both reports show their figures.

The SLO is on TPOT, which grows with the batch the arrival rate builds up on this server (about 40
ms at 1 request/s, 75 ms from 4 on, on the busy 2-core host); the target is the median request (50%
attainment), the figure least moved by other load on the host. The session's server is attached by
URL, so its runs are not marked reduced scale."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from harness.analysis.rates import attainment_crossing
from tests.e2e.conftest import LiveServer, sparkbench

pytestmark = pytest.mark.e2e
SLO, TARGET = "tpot=60ms", 0.5
SHAPE = ["--num-prompts", "12", "--input-tokens", "64", "--output-tokens", "16", "--slo", SLO, "--warmup", "1"]
SWEEP_RATES = "0.5,1,1.5,2,3,4,6"


def test_capacity_bracket_holds_the_crossing_of_a_finer_rate_sweep(sglang_server: LiveServer, tmp_path):
    tokenizer = ["--tokenizer", str(sglang_server.model_dir)]
    found = sparkbench("capacity", "synthetic", "--server", sglang_server.base_url, *tokenizer, *SHAPE,
                       "--attainment", str(TARGET), "--floor-rps", "0.5", "--ceiling-rps", "16",
                       "--tolerance", "0.5", "--max-trials", "8", "--results", str(tmp_path / "capacity"))
    assert found.returncode == 0, found.stderr
    [folder] = list((tmp_path / "capacity").iterdir())
    manifest = json.loads((folder / "capacity.json").read_text())
    assert manifest["status"] == "confirmed", manifest["sentence"]
    low, high = manifest["bracket"]
    assert manifest["trials"][-1]["role"] == "confirmation" and manifest["trials"][-1]["rate"] == low
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert page.count("data:image/png;base64,") == 4 and "confirmed by a final run" in page

    swept = sparkbench("sweep", "--server", sglang_server.base_url, *tokenizer, "--request-rate", SWEEP_RATES,
                       "--num-prompts", "12", "--input-tokens", "64", "--output-tokens", "16", "--slo", SLO,
                       "--name", "rates", "--results", str(tmp_path / "sweep"))
    assert swept.returncode == 0, swept.stderr
    [sweep] = list((tmp_path / "sweep").iterdir())
    points = pd.read_csv(sweep / "rates.csv")
    assert (points["achieved_rps"] / points["offered_rps"]).between(0.9, 1.1).all()  # the client kept up
    crossing = attainment_crossing(points, TARGET).iloc[0]
    # Where the finer sweep crosses the target, between its last rate meeting it and its first missing it,
    # overlaps the search's bracket.
    assert low < crossing["first_missing"] and high > crossing["last_meeting"], (manifest["trials"], points)
    assert (sweep / "report.html").read_text(encoding="utf-8").count("data:image/png;base64,") == 3
