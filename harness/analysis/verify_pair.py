"""The verification-cost ratio of a speculative run against its non-speculative baseline, as rows
of the comparison (`harness.metrics.verify_cost` defines every figure)."""

from __future__ import annotations

import numpy as np

from harness.analysis.roofline import model_dir
from harness.metrics.catalogue import CATALOGUE
from harness.metrics.verify_cost import verify_cost

TIMINGS = {"client": "value", "server": "server_timings"}  # timing -> stat of the rows


def speculates(derived) -> bool:
    """Whether any request of the run reports speculative verify rounds."""
    return bool(np.nansum(derived["verify_rounds"].to_numpy(dtype=float)) > 0)


def is_verify_pair(base, cand) -> bool:
    """A non-speculative baseline and a speculative candidate of the same workload and model."""
    same_model = model_dir(base.record) == model_dir(cand.record)
    return (base.workload == cand.workload and same_model and not speculates(base.derived)
            and speculates(cand.derived))


def verify_cost_rows(base, cand) -> list[dict]:
    """The candidate's verify-cost figures (stat "value", from the client's timings) and its ratio
    again from the servers' own timings (stat "server_timings"); none unless `is_verify_pair`."""
    if not is_verify_pair(base, cand):
        return []
    client = verify_cost(cand.derived, base.derived, "client")
    rows = [{"metric": metric, "stat": TIMINGS["client"], "value": value, "unit": CATALOGUE[metric].unit}
            for metric, value in client.items()]
    server = verify_cost(cand.derived, base.derived, "server")
    rows.append({"metric": "verify_cost_ratio", "stat": TIMINGS["server"], "value": server["verify_cost_ratio"],
                 "unit": CATALOGUE["verify_cost_ratio"].unit})
    return rows
